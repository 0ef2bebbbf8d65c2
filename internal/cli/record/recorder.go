package record

import (
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/trace"
)

// recorder turns informer notifications into trace events, in the order
// they are seen, into a spool file; the header (which carries the launch
// times measured along the way) is written with the trace at the end.
type recorder struct {
	mu    sync.Mutex
	o     Options
	start time.Time
	last  float64
	spool *trace.Writer
	live  map[string]bool // pods recorded and not deleted
	pods  int
	// skipped are the pods left out: their line would pass trace.MaxLine.
	skipped []string
	stopped string
	full    chan struct{}
	// nodes seen created since the start, to when; delays measured.
	created map[string]time.Time
	delays  map[string][]float64
	ns      map[string]bool
	// waiting holds the pods pending at the start until the running ones
	// are written.
	waiting []*trace.Event
}

func (r *recorder) now() time.Time {
	if r.o.Now != nil {
		return r.o.Now()
	}
	return time.Now()
}

func (r *recorder) write(e *trace.Event, initial bool) {
	if r.stopped != "" {
		return
	}
	switch {
	case initial && !e.Running:
		// A trace starts with the running pods; the pending ones of the
		// start follow them.
		r.waiting = append(r.waiting, e)
	case initial:
		r.put(e)
	default:
		r.flushWaiting()
		// Within the span a trace holds: the timer that stops the
		// recording there may fire a moment after an event.
		e.At = min(max(r.last, r.now().Sub(r.start).Seconds()), trace.MaxSpan.Seconds())
		r.put(e)
	}
}

// flushWaiting writes the pods found pending at the start, once the
// running ones are written.
func (r *recorder) flushWaiting() {
	w := r.waiting
	r.waiting = nil
	for _, e := range w {
		r.put(e)
	}
}

func (r *recorder) put(e *trace.Event) {
	if r.stopped != "" {
		return
	}
	r.last = e.At
	err := r.spool.Write(e)
	if errors.Is(err, trace.ErrLineTooLong) && e.Op == trace.OpCreate {
		// A pod the trace cannot hold is left out, and said so; its
		// delete is not written either.
		delete(r.live, e.Key())
		r.pods--
		r.skipped = append(r.skipped, e.Key())
		return
	}
	if err != nil {
		r.stopped = "writing failed: " + err.Error()
		close(r.full)
		return
	}
	if r.spool.Events() >= r.o.MaxEvents {
		r.stopped = fmt.Sprintf("reached --max-events %d", r.o.MaxEvents)
		close(r.full)
	}
}

func (r *recorder) podAdded(obj any, initial bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !trace.Recordable(p) || podutil.IsTerminal(p) || (len(r.ns) > 0 && !r.ns[p.Namespace]) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	if r.live[key] {
		return
	}
	r.live[key] = true
	r.pods++
	// A pod bound when the recording began was running: the simulator
	// starts with it placed.
	r.write(&trace.Event{Op: trace.OpCreate, Pod: trace.FromPod(p), Running: initial && p.Spec.NodeName != ""}, initial)
}

func (r *recorder) podGone(ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := ns + "/" + name
	if !r.live[key] {
		return
	}
	delete(r.live, key)
	r.write(&trace.Event{Op: trace.OpDelete, Namespace: ns, Name: name}, false)
}

func (r *recorder) podUpdated(_, obj any) {
	if p, ok := obj.(*corev1.Pod); ok && podutil.IsTerminal(p) {
		r.podGone(p.Namespace, p.Name) // it holds no room once it completed
	}
}

func (r *recorder) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		r.podGone(p.Namespace, p.Name)
	}
}

// nodeSeen times the nodes berth launches from their creation (seen
// during the recording) to their first Ready.
func (r *recorder) nodeSeen(obj any, initial bool) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.Annotations[v1alpha1.AnnotationLaunchedBy] == "" || n.Labels[v1alpha1.LabelNodeGroup] == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at, seen := r.created[n.Name]
	switch {
	case initial:
		return // created before the recording: its boot was not seen
	case !seen && !nodeutil.Ready(n):
		r.created[n.Name] = r.now()
	case seen && !at.IsZero() && nodeutil.Ready(n):
		g := n.Labels[v1alpha1.LabelNodeGroup]
		// In what a trace holds: a node Ready within half a millisecond
		// is 1 ms, one that took longer than a trace's longest delay is
		// not a launch to replay.
		if d := r.now().Sub(at); len(r.delays[g]) < maxDelaysPerGroup && d <= trace.MaxLaunchDelay {
			r.delays[g] = append(r.delays[g], max(roundMillis(d.Seconds()), 0.001))
		}
		r.created[n.Name] = time.Time{} // timed once
	}
}

// maxDelaysPerGroup bounds the launch times kept.
const maxDelaysPerGroup = 1000

func roundMillis(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

func (r *recorder) stop(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped == "" {
		r.flushWaiting() // pods pending at the start are not lost
		r.stopped = why
	}
}
