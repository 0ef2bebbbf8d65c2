// Package state holds what berth's controllers share at run time: which
// offerings recently failed to launch, and how many headroom units and
// buffer chunks the latest plan fit in free capacity.
package state

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// Failure is a failed launch of an offering.
type Failure struct {
	Offering scaleup.Offering
	Message  string
	At       time.Time
}

// Offerings remembers offerings that failed to launch, for a while: the
// planner skips them, and the node group shows a LaunchFailing condition.
// Safe for concurrent use.
type Offerings struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	ttl   time.Duration
	fails map[scaleup.Offering]Failure
	// OnChange, if set, is called (outside the lock) with the node group of
	// every newly recorded failure.
	OnChange func(nodeGroup string)
}

// NewOfferings returns a store that forgets a failure after ttl.
func NewOfferings(clk clock.PassiveClock, ttl time.Duration) *Offerings {
	return &Offerings{clock: clk, ttl: ttl, fails: map[scaleup.Offering]Failure{}}
}

// MarkUnavailable records a failed launch.
func (o *Offerings) MarkUnavailable(off scaleup.Offering, message string) {
	o.mu.Lock()
	o.fails[off] = Failure{Offering: off, Message: message, At: o.clock.Now()}
	o.mu.Unlock()
	if o.OnChange != nil {
		o.OnChange(off.NodeGroup)
	}
}

// Unavailable returns the offerings that failed within the TTL, sorted.
func (o *Offerings) Unavailable() []scaleup.Offering {
	var out []scaleup.Offering
	for _, f := range o.Failures("") {
		out = append(out, f.Offering)
	}
	return out
}

// Failures returns the current failures of a node group ("" for all),
// oldest first, and forgets expired ones.
func (o *Offerings) Failures(nodeGroup string) []Failure {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	var out []Failure
	for k, f := range o.fails {
		if now.Sub(f.At) >= o.ttl {
			delete(o.fails, k)
			continue
		}
		if nodeGroup == "" || k.NodeGroup == nodeGroup {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Offering.InstanceType+out[i].Offering.Zone+out[i].Offering.CapacityType <
			out[j].Offering.InstanceType+out[j].Offering.Zone+out[j].Offering.CapacityType
	})
	return out
}

// NextExpiry returns when the oldest failure of a node group expires, or
// zero when there is none.
func (o *Offerings) NextExpiry(nodeGroup string) time.Time {
	fs := o.Failures(nodeGroup)
	if len(fs) == 0 {
		return time.Time{}
	}
	return fs[0].At.Add(o.ttl)
}
