package state

import (
	"sync"
	"time"

	"github.com/berth-dev/berth/internal/headroom/demand"
)

// Target is what the demand learner knows of one Headroom with a target:
// the estimate, the window it counted in, its history's size, and the
// measured waits of the pods in scope.
type Target struct {
	Estimate demand.Estimate
	Window   time.Duration
	// Burst is the estimate over windows of BurstWindow, for a Headroom
	// that may keep standby units (nil otherwise, or when BurstWindow is
	// 0: a resume is within the wait).
	Burst       *demand.Estimate
	BurstWindow time.Duration
	// BurstKnown: BurstWindow was worked out (a Headroom with standby).
	BurstKnown bool
	Since      time.Time
	Windows    int64
	Bursts     int64
	LastHour   demand.Measured
	LastDay    demand.Measured
	// LargestPod is the most units one pod in scope needed on arriving,
	// over the last day.
	LargestPod int64
	// Shapes are the estimates of the shapes learned apart (pods larger
	// than a unit), the smaller first.
	Shapes []demand.ShapeEstimate
}

// sameShapes reports whether two lists of learned shapes' estimates are
// the same.
func sameShapes(a, b []demand.ShapeEstimate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Estimate != b[i].Estimate || !a[i].Shape.Equal(b[i].Shape) {
			return false
		}
	}
	return true
}

// Targets are the learner's results by Headroom name, read by the
// headroom controller. Safe for concurrent use.
type Targets struct {
	mu     sync.Mutex
	byName map[string]Target
	// OnChange, if set, is called (outside the lock) with a Headroom whose
	// estimate changed (units, known or window).
	OnChange func(name string)
}

// NewTargets returns an empty store.
func NewTargets() *Targets { return &Targets{byName: map[string]Target{}} }

// Set stores a Headroom's result.
func (t *Targets) Set(name string, v Target) {
	t.mu.Lock()
	old, had := t.byName[name]
	t.byName[name] = v
	t.mu.Unlock()
	changed := !had || old.Estimate != v.Estimate || old.Window != v.Window || old.BurstWindow != v.BurstWindow || old.BurstKnown != v.BurstKnown ||
		(old.Burst == nil) != (v.Burst == nil) || (old.Burst != nil && *old.Burst != *v.Burst) || !sameShapes(old.Shapes, v.Shapes)
	if changed && t.OnChange != nil {
		t.OnChange(name)
	}
}

// Get returns a Headroom's result.
func (t *Targets) Get(name string) (Target, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.byName[name]
	return v, ok
}

// Delete forgets a Headroom.
func (t *Targets) Delete(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byName, name)
}
