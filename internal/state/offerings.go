// Package state holds what berth's controllers share at run time: which
// offerings recently failed to launch, and how many headroom units and
// buffer chunks the latest plan fit in free capacity.
package state

import (
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"

	"k8s.io/utils/clock"
)

// Why an offering failed (Failure.Reason).
const (
	// FailureInsufficientCapacity: the provider had no capacity for it.
	FailureInsufficientCapacity = "InsufficientCapacity"
	// FailureLaunchError: the provider refused the launch, or its API
	// call failed.
	FailureLaunchError = "LaunchError"
	// FailureTimedOut: a launched machine did not register a Ready node
	// within the max provision time.
	FailureTimedOut = "LaunchTimedOut"
	// FailureCapacityReclaimed: a node of the offering got an
	// interruption notice that takes its capacity back.
	FailureCapacityReclaimed = "CapacityReclaimed"
)

// LaunchReason is the reason of a launch the provider failed:
// FailureInsufficientCapacity when it said it had no capacity,
// FailureLaunchError otherwise.
func LaunchReason(insufficientCapacity bool) string {
	if insufficientCapacity {
		return FailureInsufficientCapacity
	}
	return FailureLaunchError
}

// Failure is a failed launch of an offering.
type Failure struct {
	Offering v1alpha1.OfferingKey
	// Reason is why it failed (Failure*; empty for a failure restored
	// from a status written before reasons were kept).
	Reason  string
	Message string
	// At is when the launch failed; zero for a failure restored from a
	// node group's status, which keeps only its expiry (Until).
	At time.Time
	// Until is when the offering may be tried again.
	Until time.Time
	// Streak counts failures in a row: each one doubles the wait.
	Streak int
}

// MaxBackoffFactor caps the exponential backoff of an offering that keeps
// failing: it waits at most this many times the base TTL.
const MaxBackoffFactor = 16

// Offerings remembers offerings that failed to launch, for a while: the
// planner skips them, and the node group shows a LaunchFailing condition.
// An offering that fails again soon after its wait ended waits twice as
// long (up to MaxBackoffFactor times the TTL), so a launch that always
// fails (a bad image, a quota, a webhook that rejects the node) costs one
// attempt per backoff, not one per round. Safe for concurrent use.
type Offerings struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	ttl   time.Duration
	fails map[v1alpha1.OfferingKey]Failure
	// OnChange, if set, is called (outside the lock) with the node group of
	// every newly recorded failure.
	OnChange func(nodeGroup string)
}

// NewOfferings returns a store that forgets a failure after ttl.
func NewOfferings(clk clock.PassiveClock, ttl time.Duration) *Offerings {
	return &Offerings{clock: clk, ttl: ttl, fails: map[v1alpha1.OfferingKey]Failure{}}
}

// MarkUnavailable records a failed launch, with its reason (Failure*).
func (o *Offerings) MarkUnavailable(off v1alpha1.OfferingKey, reason, message string) {
	o.mark(off, reason, message, time.Time{})
}

// lateFailureWindow is how long past the end of its streak a failure is
// remembered, so that a launch failure found late (MarkLaunchFailed) can
// still continue the streak: longer than any max provision time in use.
const lateFailureWindow = time.Hour

// MarkLaunchFailed records a launch made at launched that failed only
// now (a node never Ready, a machine whose Node never registered, found
// out a max provision time later): the streak is judged at the launch,
// so that an offering whose every launch hangs waits longer each time,
// though each failure comes to light long after the previous wait ended.
func (o *Offerings) MarkLaunchFailed(off v1alpha1.OfferingKey, message string, launched time.Time) {
	o.mark(off, FailureTimedOut, message, launched)
}

// mark records a failure found now of a launch made at launched (zero:
// now).
func (o *Offerings) mark(off v1alpha1.OfferingKey, reason, message string, launched time.Time) {
	o.mu.Lock()
	now := o.clock.Now()
	at := now
	if !launched.IsZero() && launched.Before(now) {
		at = launched
	}
	f := Failure{Offering: off, Reason: reason, Message: message, At: now, Streak: 1}
	prev, known := o.fails[off]
	switch {
	case known && at.Before(prev.Until):
		// Another failure of the same wait (the other launches of one
		// round, nodes of one reclaim wave): the streak stays, and the
		// wait is at least as long again from now.
		f.Streak = prev.Streak
	case known && at.Before(prev.Until.Add(o.ttl)):
		// A failure within one TTL after the previous wait ended continues
		// the streak; a longer good spell starts it afresh.
		f.Streak = min(prev.Streak+1, 32)
	}
	factor := min(time.Duration(1)<<(f.Streak-1), MaxBackoffFactor)
	f.Until = now.Add(factor * o.ttl)
	if known && prev.Until.After(f.Until) {
		f.Until = prev.Until
	}
	o.fails[off] = f
	o.mu.Unlock()
	if o.OnChange != nil {
		o.OnChange(off.NodeGroup)
	}
}

// Restore records a failure read back from the cluster (a NodeGroup's
// status) when the controller starts; a failure already known is kept.
func (o *Offerings) Restore(f Failure) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.fails[f.Offering]; !ok && o.clock.Now().Before(f.Until) {
		f.Streak = max(f.Streak, 1)
		o.fails[f.Offering] = f
	}
}

// RestoreStatus takes back, as Restore does each, the failures a node
// group's status records (status.unavailableOfferings, written by a
// previous leader), and returns how many it read. The status keeps no
// time of the failure: At stays zero.
func (o *Offerings) RestoreStatus(ng *v1alpha1.NodeGroup) int {
	for _, u := range ng.Status.UnavailableOfferings {
		o.Restore(Failure{
			Offering: v1alpha1.OfferingKey{NodeGroup: ng.Name, InstanceType: u.InstanceType, Zone: u.Zone, CapacityType: string(u.CapacityType)},
			Reason:   u.Reason, Message: u.Message, Until: u.Until.Time, Streak: int(u.Streak),
		})
	}
	return len(ng.Status.UnavailableOfferings)
}

// Unavailable returns the offerings that failed within the TTL, sorted.
func (o *Offerings) Unavailable() []v1alpha1.OfferingKey {
	var out []v1alpha1.OfferingKey
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
		if !now.Before(f.Until) {
			if !now.Before(f.Until.Add(o.ttl + lateFailureWindow)) {
				delete(o.fails, k) // the streak is over too, for a failure found late as well
			}
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

// NextExpiry returns when the first current failure of a node group
// expires, or zero when there is none.
func (o *Offerings) NextExpiry(nodeGroup string) time.Time {
	var first time.Time
	for _, f := range o.Failures(nodeGroup) {
		if first.IsZero() || f.Until.Before(first) {
			first = f.Until
		}
	}
	return first
}
