// Package trace is berth's format for the history of a cluster's pods:
// JSON lines, one event per line, after a header line. It is what
// `berth record` writes, `berth trace generate` synthesises and
// `berth simulate` replays, streamed both ways so that a trace of millions
// of events never has to fit in memory.
//
// Format, version 1:
//
//	{"version":1,"start":"2026-11-23T00:00:00Z","source":"generate diurnal","launchDelays":{"web":[41.2,39.8]}}
//	{"at":12.5,"op":"create","pod":{"namespace":"shop","name":"web-1","workload":"shop/web","spec":{...}}}
//	{"at":30.0,"op":"delete","namespace":"shop","name":"web-1"}
//	{"at":86400,"op":"end"}
//
// at is seconds since start (non-decreasing); op is create, delete or
// end (the end of the recording, optional, last); "running":true marks a
// create of a pod that was already running when the recording began
// (such events come first, at 0): the simulator starts with it placed;
// spec is a Kubernetes PodSpec with what scheduling reads (containers'
// requests, node selector, affinity, tolerations, topology spread,
// priority, resource claims); workload names the pod's controller
// ("namespace/name", empty for a bare pod). launchDelays are measured
// launch-to-Ready times per node group in seconds (optional).
package trace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/quantity"
)

// Version is the format version this package reads and writes.
const Version = 1

// Header is the first line of a trace.
type Header struct {
	Version int       `json:"version"`
	Start   time.Time `json:"start"`
	Source  string    `json:"source,omitempty"`
	// LaunchDelays are measured launch-to-Ready times per node group, in
	// seconds.
	LaunchDelays map[string][]float64 `json:"launchDelays,omitempty"`
}

// Op is what happens to a pod.
type Op string

// The operations of a trace.
const (
	OpCreate Op = "create"
	OpDelete Op = "delete"
	// OpEnd ends the trace: the recording (or the synthetic day) stopped
	// then. Nothing may follow it. A trace without one ends at its last
	// event.
	OpEnd Op = "end"
)

// Pod is what the simulator needs of a pod.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Workload is "namespace/name" of the pod's controller; empty for a
	// bare pod.
	Workload string            `json:"workload,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Spec     corev1.PodSpec    `json:"spec"`
}

// Event is one line after the header.
type Event struct {
	// At is seconds since the trace's start.
	At float64 `json:"at"`
	Op Op      `json:"op"`
	// Pod is set for create.
	Pod *Pod `json:"pod,omitempty"`
	// Namespace and Name are set for delete.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Running marks a create of a pod that was running when the trace
	// began: the cluster held it, it did not arrive. Such events come
	// first, at 0.
	Running bool `json:"running,omitempty"`
}

// Key names the event's pod.
func (e *Event) Key() string {
	if e.Pod != nil {
		return e.Pod.Namespace + "/" + e.Pod.Name
	}
	return e.Namespace + "/" + e.Name
}

// MaxLine bounds one line of a trace: more than any pod the API server
// stores takes (its request body is at most 3 MiB, etcd's object 1.5
// MiB, and a trace keeps of a pod only what scheduling reads), so a pod
// `berth record` saw fits one line. The Writer refuses a longer line
// (ErrLineTooLong) rather than write one the Reader would refuse.
const MaxLine = 8 << 20

// ErrLineTooLong is the Writer's error for an event whose line would pass
// MaxLine; nothing is written.
var ErrLineTooLong = fmt.Errorf("a trace line is at most %d bytes (MaxLine)", MaxLine)

// Reader reads a trace one event at a time.
type Reader struct {
	Header Header
	sc     *bufio.Scanner
	line   int
	last   float64
	ended  bool
	// started: an event that is not a running pod was read.
	started bool
	// live are the pods created and not deleted yet.
	live map[string]bool
}

// NewReader reads and checks the header.
func NewReader(r io.Reader) (*Reader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine+1) // a line of MaxLine bytes and its newline
	tr := &Reader{sc: sc}
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("trace line 1: %w", lineErr(err))
		}
		return nil, errors.New("trace: empty, want a header line")
	}
	tr.line = 1
	if err := json.Unmarshal(sc.Bytes(), &tr.Header); err != nil {
		return nil, fmt.Errorf("trace line 1 (header): %w", err)
	}
	if tr.Header.Version != Version {
		return nil, fmt.Errorf("trace line 1: version %d, this berth reads version %d", tr.Header.Version, Version)
	}
	if err := CheckStart(tr.Header.Start); err != nil {
		return nil, fmt.Errorf("trace line 1: %w", err)
	}
	for group, delays := range tr.Header.LaunchDelays {
		for _, d := range delays {
			if !(d > 0 && d <= MaxLaunchDelay.Seconds()) {
				return nil, fmt.Errorf("trace line 1: launchDelays of %s: %g, want seconds above 0 and at most %.0f", group, d, MaxLaunchDelay.Seconds())
			}
		}
	}
	return tr, nil
}

// A trace's start is at or after EarliestStart and before LatestStart:
// the simulator counts time in nanoseconds since 1970, which int64
// holds until 2262 (a trace spans at most MaxSpan past its start).
var (
	EarliestStart = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	LatestStart   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// CheckStart refuses a trace start outside [EarliestStart, LatestStart)
// (a header without one included).
func CheckStart(t time.Time) error {
	if t.Before(EarliestStart) || !t.Before(LatestStart) {
		return fmt.Errorf("start %s: want a time from %s to before %s (a header needs a start)",
			t.UTC().Format(time.RFC3339), EarliestStart.Format(time.RFC3339), LatestStart.Format(time.RFC3339))
	}
	return nil
}

// MaxSpan bounds when a trace's events happen (seconds since its start):
// the simulator samples every minute of it. MaxLaunchDelay bounds a
// recorded launch delay.
const (
	MaxSpan        = 90 * 24 * time.Hour
	MaxLaunchDelay = 24 * time.Hour
)

// Next returns the next event, or io.EOF at the end.
func (r *Reader) Next() (*Event, error) {
	for r.sc.Scan() {
		r.line++
		b := r.sc.Bytes()
		if len(b) == 0 {
			continue
		}
		if h := quantity.HugeExponent(b); h != "" {
			// apimachinery's parser does not return on some of these.
			return nil, fmt.Errorf("trace line %d: the number %s has an exponent of more than %d digits", r.line, h, quantity.MaxExponentDigits)
		}
		e := &Event{}
		if err := json.Unmarshal(b, e); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", r.line, err)
		}
		if err := r.check(e); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", r.line, err)
		}
		if e.Pod != nil {
			// As the controller's cache bounds what it reads: a request
			// with no digits before a long exponent ("e999999999") is a
			// zero whose millicores take a step per unit of exponent.
			quantity.BoundPodSpec(&e.Pod.Spec)
		}
		return e, nil
	}
	if err := r.sc.Err(); err != nil {
		return nil, fmt.Errorf("trace line %d: %w", r.line+1, lineErr(err))
	}
	return nil, io.EOF
}

// lineErr says which limit a line too long passed (bufio's error names
// none).
func lineErr(err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%w: %w", err, ErrLineTooLong)
	}
	return err
}

func (r *Reader) check(e *Event) error {
	switch {
	case r.ended:
		return errors.New("an event after the end event")
	case !(e.At >= 0 && e.At <= MaxSpan.Seconds()):
		return fmt.Errorf("at %g: want seconds since the trace's start, from 0 to %.0f (%s)", e.At, MaxSpan.Seconds(), MaxSpan)
	case e.At < r.last:
		return fmt.Errorf("at %.3f is before the previous event's %.3f: events must be in time order", e.At, r.last)
	case e.Op == OpCreate && (e.Pod == nil || e.Pod.Name == "" || e.Pod.Namespace == ""):
		return errors.New("create needs a pod with a namespace and a name")
	case e.Op == OpCreate && quantity.NegativeRequests(&e.Pod.Spec) != nil:
		return fmt.Errorf("pod %s: %w", e.Key(), quantity.NegativeRequests(&e.Pod.Spec))
	case e.Op == OpCreate && e.Pod.Spec.NodeName != "":
		return fmt.Errorf("pod %s: spec.nodeName is set: a trace's pods are placed by the simulation (a pod running when the trace began is marked running)", e.Key())
	case e.Op == OpDelete && (e.Name == "" || e.Namespace == ""):
		return errors.New("delete needs a namespace and a name")
	case e.Op != OpCreate && e.Op != OpDelete && e.Op != OpEnd:
		return fmt.Errorf("op %q, want create, delete or end", e.Op)
	case e.Running && (e.Op != OpCreate || e.At != 0 || r.started):
		return errors.New("running marks a create at 0 before every other event: a pod running when the trace began")
	}
	if r.live == nil {
		r.live = map[string]bool{}
	}
	switch e.Op {
	case OpCreate:
		if r.live[e.Key()] {
			return fmt.Errorf("pod %s is created again while it exists: delete it first", e.Key())
		}
		r.live[e.Key()] = true
	case OpDelete:
		delete(r.live, e.Key())
	}
	r.last = e.At
	r.ended = e.Op == OpEnd
	r.started = r.started || !e.Running
	return nil
}

// Writer writes a trace.
type Writer struct {
	w *bufio.Writer
	n int
}

// NewWriter writes the header.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Version = Version
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := &Writer{w: bw}
	return tw, tw.line(h)
}

// Write writes an event; an event whose line would pass MaxLine is not
// written (ErrLineTooLong) and not counted.
func (w *Writer) Write(e *Event) error {
	if err := w.line(e); err != nil {
		return err
	}
	w.n++
	return nil
}

// Events is how many events were written.
func (w *Writer) Events() int { return w.n }

func (w *Writer) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxLine {
		return fmt.Errorf("%w: this one would be %d", ErrLineTooLong, len(b))
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return nil
}

// Flush writes what is buffered.
func (w *Writer) Flush() error { return w.w.Flush() }
