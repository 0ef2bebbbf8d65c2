package demand

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Requests are a pod's requests in milli-units, as a Shape.
type Requests map[corev1.ResourceName]int64

// RequestsOf converts a resource list.
func RequestsOf(rl corev1.ResourceList) Requests { return Requests(ShapeOf(rl)) }

// Recorder cuts arrivals and departures into steps of half a window and
// adds to the history, per step, the demand of the window that ends with
// it (the step and the one before): windows that overlap by half, so a
// burst that straddles two steps still counts as one (tumbling windows
// would split it in two, and the history would say half the units cover
// it). A step is added once no more of its pods can come: a pod counts
// in the step of its creation but is known only when it binds (up to a
// launch time and more later), so a step is closed Grace after its end.
type Recorder struct {
	H *History
	// Grace after a step's end before it is closed.
	Grace time.Duration
	open  map[int64]Requests // step index -> net requests
	// prev is the last closed step's requests.
	prev Requests
}

// NewRecorder records into h from now on: the windows before now were not
// watched (berth was not running, or the history is new) and are not
// counted, as demand zero or otherwise.
func NewRecorder(h *History, now time.Time) *Recorder {
	r := &Recorder{H: h, Grace: h.Window + 2*time.Minute, open: map[int64]Requests{}}
	r.H.Next = max(r.H.Next, r.index(now)+1)
	return r
}

func (r *Recorder) index(t time.Time) int64 { return t.UnixNano() / int64(r.H.Step()) }

func (r *Recorder) start(i int64) time.Time { return time.Unix(0, i*int64(r.H.Step())) }

// add adds sign x req to the step of at, unless that step is closed
// already (a late event is dropped: the steps are bounded).
func (r *Recorder) add(at, now time.Time, req Requests, sign int64) {
	i := r.index(at)
	if i < r.H.Next || now.Sub(at) > r.H.Step()+r.Grace {
		return // its step is closed, or was never watched
	}
	w := r.open[i]
	if w == nil {
		w = Requests{}
		r.open[i] = w
	}
	for name, v := range req {
		w[name] = addSaturating(w[name], sign*r.bound(name, v))
	}
}

// bound caps a pod's request at what a window can count of it (maxUnits
// of the shape's unit): a pod of a request near the largest quantity
// that arrives and leaves in one window then cancels out, and the other
// pods' demand stands (a sum saturated by it would lose theirs).
func (r *Recorder) bound(name corev1.ResourceName, v int64) int64 {
	per := r.H.Shape[name]
	if per <= 0 || per > math.MaxInt64/maxUnits {
		return v
	}
	return min(v, per*maxUnits)
}

// addSaturating is a+b held within int64: a pod's request near the
// largest quantity (any user may create one) must not wrap a window's
// sum to a demand of the opposite sign.
func addSaturating(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// Arrived records a pod of the scope that arrived (was created) at at,
// learned now.
func (r *Recorder) Arrived(at, now time.Time, req Requests) { r.add(at, now, req, 1) }

// Left records a pod of the scope that left at at.
func (r *Recorder) Left(at, now time.Time, req Requests) { r.add(at, now, req, -1) }

// Close adds to the history the window ending with every step that
// ended Grace before now (one that saw nothing with demand zero), and
// returns how many steps it closed.
func (r *Recorder) Close(now time.Time) int {
	last := r.index(now.Add(-r.Grace)) - 1
	n := 0
	for ; r.H.Next <= last; r.H.Next++ {
		w := r.open[r.H.Next]
		both := Requests{}
		for name, v := range r.prev {
			both[name] = addSaturating(both[name], v)
		}
		for name, v := range w {
			both[name] = addSaturating(both[name], v)
		}
		r.H.Add(r.start(r.H.Next), r.H.Shape.Units(both))
		r.prev = w
		n++
	}
	for i := range r.open {
		if i < r.H.Next {
			delete(r.open, i)
		}
	}
	return n
}
