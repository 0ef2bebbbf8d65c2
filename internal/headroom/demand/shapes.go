package demand

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Learned shapes.
//
// A Headroom's units are of one shape. A pod larger than one unit needs
// several units on one node, and units spread over nodes may not give it
// that: counted in units of the Headroom's shape, its burst looks covered
// while it waits. So the pods larger than a unit are also learned apart,
// by their own request shape: each such shape has a history of its own,
// of the same form and bounds as the unit's, counted in units of that
// shape (one pod, one unit). The unit's history still counts every pod
// (in units of its shape: eight pods of 250m are two units of 1 cpu), so
// it says how much room all bursts need together; a learned shape's
// history says how much of that room must come in pieces of its shape
// (headroom.Resolve lays the units out so).
//
// At most MaxShapes shapes are learned besides the unit. A pod of another
// shape counts in the smallest learned shape that holds it (in units of
// that shape), else in the unit's history as today (several units); a
// learned shape that saw no pod for the history's span gives its place to
// a new one.

// MaxShapes bounds the shapes learned besides the unit.
const MaxShapes = 3

// maxShapeResources bounds the resources of a learned shape: a pod with
// more (extended resources) counts in the unit's history.
const maxShapeResources = 16

// ShapesVersion is the version of the persisted learned shapes.
const ShapesVersion = 1

// Class is the demand of the pods of one learned shape (its history's
// Shape).
type Class struct {
	Rec *Recorder
	// LastSeen is when a pod of the shape last arrived.
	LastSeen time.Time
}

// Shapes routes pods larger than a unit to the history of their shape.
type Shapes struct {
	// Unit is the Headroom's unit; Window and Span the unit history's
	// window and span, which every learned history shares.
	Unit    Shape
	Window  time.Duration
	Span    time.Duration
	Classes []*Class
}

// NewShapes starts learning shapes beside a unit.
func NewShapes(unit Shape, window, span time.Duration) *Shapes {
	if span <= 0 {
		span = DefaultHistory
	}
	return &Shapes{Unit: unit, Window: window, Span: span}
}

// Equal reports whether two shapes request the same.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for k, v := range s {
		if o[k] != v {
			return false
		}
	}
	return true
}

// Holds reports whether one unit of s holds the requests: s has every
// resource they ask for, at least as much.
func (s Shape) Holds(req Requests) bool {
	for k, v := range req {
		if v > 0 && s[k] < v {
			return false
		}
	}
	return true
}

// size orders shapes, the smaller first: by the sum of their resources
// in units of the Headroom's unit.
func (s *Shapes) size(x Shape) int64 {
	f := 0.0
	for k, v := range x {
		if per := s.Unit[k]; per > 0 {
			f += float64(v) / float64(per)
		}
	}
	return int64(min(f*1000, 1e15))
}

// Route returns the class a pod with these requests, arriving at at and
// learned now, counts in, learning its shape when it is new and there is
// room: nil for the unit's history (a pod within one unit, or one no
// learned shape holds when MaxShapes are learned). A learned shape whose
// last pod of its own shape is older than Span gives its place to the
// new one (a pod it merely holds does not keep it). A new shape's
// history starts with the step of the pod's arrival, so that its first
// burst counts. A pod counts as one unit of its class (Class.Arrived),
// whether it is of the class's shape or smaller.
func (s *Shapes) Route(req Requests, at, now time.Time) *Class {
	if s == nil || !s.learnable(req) {
		return nil
	}
	shape := roundUp(req)
	if c := s.find(shape); c != nil {
		c.LastSeen = now
		return c
	}
	slot := len(s.Classes)
	if slot == MaxShapes {
		if slot = s.stale(now); slot < 0 {
			return s.holder(req)
		}
	}
	if now.Sub(at) > s.Window {
		at = now.Add(-s.Window) // a pod that waited long: its step is closed anyway
	}
	h := NewHistory(s.Window, shape, s.Span, at)
	c := &Class{Rec: NewRecorder(h, at.Add(-h.Step())), LastSeen: now}
	if slot == len(s.Classes) {
		s.Classes = append(s.Classes, c)
	} else {
		s.Classes[slot] = c
	}
	return c
}

// Grains a learned shape's cpu and memory are rounded up to, so that
// pods whose requests differ by a little (a vertical autoscaler's
// recommendations) share a shape: 50m of cpu and 64Mi of memory, in
// milli-units. Other resources are kept as requested.
const (
	cpuGrain    = 50
	memoryGrain = 64 << 20 * 1000
)

// roundUp is the shape a pod's requests are learned as.
func roundUp(req Requests) Shape {
	out := Shape{}
	for k, v := range req {
		if v <= 0 {
			continue
		}
		switch k {
		case corev1.ResourceCPU:
			if v <= math.MaxInt64-cpuGrain {
				v = (v + cpuGrain - 1) / cpuGrain * cpuGrain
			}
		case corev1.ResourceMemory:
			if v <= math.MaxInt64-memoryGrain {
				v = (v + memoryGrain - 1) / memoryGrain * memoryGrain
			}
		}
		out[k] = v
	}
	return out
}

// Arrived records a pod of the class that arrived at at, learned now: one
// unit of the class's shape, whatever its own requests (it needs a unit
// of its own; the class's shape holds it).
func (c *Class) Arrived(at, now time.Time) { c.Rec.Arrived(at, now, Requests(c.Rec.H.Shape)) }

// Left records a pod of the class that left at at.
func (c *Class) Left(at, now time.Time) { c.Rec.Left(at, now, Requests(c.Rec.H.Shape)) }

// Find returns the class a pod with these requests counted in, without
// learning a shape (a departure): nil for the unit's history.
func (s *Shapes) Find(req Requests) *Class {
	if s == nil || !s.learnable(req) {
		return nil
	}
	if c := s.find(roundUp(req)); c != nil {
		return c
	}
	return s.holder(req)
}

// learnable reports whether a pod is larger than one unit and has a
// shape that may be learned.
func (s *Shapes) learnable(req Requests) bool {
	n := 0
	for _, v := range req {
		if v > 0 {
			n++
		}
	}
	return n > 0 && n <= maxShapeResources && s.Unit.Units(req) > 1
}

func (s *Shapes) find(shape Shape) *Class {
	for _, c := range s.Classes {
		if c.Rec.H.Shape.Equal(shape) {
			return c
		}
	}
	return nil
}

// holder is the smallest learned class that holds the requests in one
// of its units; nil when none does.
func (s *Shapes) holder(req Requests) *Class {
	var best *Class
	for _, c := range s.Classes {
		if c.Rec.H.Shape.Holds(req) && (best == nil || s.size(c.Rec.H.Shape) < s.size(best.Rec.H.Shape)) {
			best = c
		}
	}
	return best
}

// stale is the index of the learned shape whose last pod is the oldest,
// when it is older than Span; -1 otherwise.
func (s *Shapes) stale(now time.Time) int {
	i := -1
	for k, c := range s.Classes {
		if now.Sub(c.LastSeen) > s.Span && (i < 0 || c.LastSeen.Before(s.Classes[i].LastSeen)) {
			i = k
		}
	}
	return i
}

// Close closes the windows of every learned shape.
func (s *Shapes) Close(now time.Time) {
	for _, c := range s.Classes {
		c.Rec.Close(now)
	}
}

// SetSpan changes how far back bursts count, for every learned shape.
func (s *Shapes) SetSpan(span time.Duration) {
	s.Span = span
	for _, c := range s.Classes {
		c.Rec.H.HalfLife = span / 2
	}
}

// ShapeEstimate is the units of one learned shape a goal needs now.
type ShapeEstimate struct {
	Shape Shape
	Estimate
}

// Estimates are the units of each learned shape that cover share of its
// demand (learned shapes in the order of their size, the smaller first).
func (s *Shapes) Estimates(now time.Time, share float64, minHistory time.Duration) []ShapeEstimate {
	out := make([]ShapeEstimate, 0, len(s.Classes))
	for _, c := range s.Classes {
		out = append(out, ShapeEstimate{Shape: c.Rec.H.Shape, Estimate: c.Rec.H.EstimateAfter(now, share, minHistory)})
	}
	slices.SortStableFunc(out, func(a, b ShapeEstimate) int { return cmp.Compare(s.size(a.Shape), s.size(b.Shape)) })
	return out
}

// Saved is the persisted form of learned shapes.
type Saved struct {
	Version int          `json:"version"`
	Classes []SavedClass `json:"classes,omitempty"`
}

// SavedClass is one learned shape's history.
type SavedClass struct {
	LastSeen time.Time `json:"lastSeen"`
	History  *History  `json:"history"`
}

// Save returns the persisted form.
func (s *Shapes) Save() Saved {
	out := Saved{Version: ShapesVersion}
	for _, c := range s.Classes {
		out.Classes = append(out.Classes, SavedClass{LastSeen: c.LastSeen, History: c.Rec.H})
	}
	return out
}

// Check validates learned shapes read back from storage.
func (sv *Saved) Check() error {
	if sv.Version != ShapesVersion {
		return fmt.Errorf("learned shapes version %d, want %d", sv.Version, ShapesVersion)
	}
	if len(sv.Classes) > MaxShapes {
		return fmt.Errorf("%d learned shapes, at most %d", len(sv.Classes), MaxShapes)
	}
	for i, c := range sv.Classes {
		if c.History == nil {
			return fmt.Errorf("learned shape %d without a history", i)
		}
		if err := c.History.Check(); err != nil {
			return fmt.Errorf("learned shape %d: %w", i, err)
		}
		if len(c.History.Shape) > maxShapeResources {
			return errors.New("a learned shape with too many resources")
		}
	}
	return nil
}

// Restore resumes learning from saved shapes: those learned in the
// unit's window are kept (another window starts them again, as the
// unit's history); their windows before now were not watched.
func (s *Shapes) Restore(sv Saved, now time.Time) {
	s.Classes = s.Classes[:0]
	for _, c := range sv.Classes {
		if len(s.Classes) == MaxShapes || !c.History.Matches(s.Window, c.History.Shape) || !s.learnable(Requests(c.History.Shape)) {
			continue
		}
		c.History.HalfLife = s.Span / 2
		s.Classes = append(s.Classes, &Class{Rec: NewRecorder(c.History, now), LastSeen: c.LastSeen})
	}
}

// Rebased is a copy of saved shapes learned elsewhere in time (another
// trace), moved to start watching at now as History.Rebase does; each
// shape counts as seen now.
func (sv Saved) Rebased(now time.Time) Saved {
	out := Saved{Version: sv.Version}
	for _, c := range sv.Classes {
		if c.History == nil {
			continue
		}
		h := *c.History
		for i := range h.Hours {
			h.Hours[i].Bins = slices.Clone(c.History.Hours[i].Bins)
		}
		h.Rebase(now)
		out.Classes = append(out.Classes, SavedClass{LastSeen: now, History: &h})
	}
	return out
}
