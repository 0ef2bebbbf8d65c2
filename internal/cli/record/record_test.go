package record

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/tracetest"
	"github.com/berth-dev/berth/internal/trace"
)

// recording is a recorder spooling into a buffer, from start, whose clock
// reads *now.
func recording(t *testing.T, start time.Time, now *time.Time) (*recorder, *bytes.Buffer, *trace.Writer) {
	t.Helper()
	var buf bytes.Buffer
	spool, err := trace.NewWriter(&buf, trace.Header{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{o: Options{MaxEvents: 100, Now: func() time.Time { return *now }}, live: map[string]bool{},
		full: make(chan struct{}), spool: spool, start: start}
	return r, &buf, spool
}

// A recording begins with the pods bound when it started, marked
// running, then the pods pending then, then what happened after: the
// informer hands the pods of its first list in any order, and a trace
// whose running pods came after another event would be refused by
// berth simulate.
func TestRecordingBeginsWithTheRunningPods(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	now := start
	r, buf, spool := recording(t, start, &now)
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	r.podAdded(pod("pending-1", ""), true)
	r.podAdded(pod("running-1", "n1"), true)
	r.podAdded(pod("pending-2", ""), true)
	r.podAdded(pod("running-2", "n2"), true)
	now = start.Add(5 * time.Second)
	r.podAdded(pod("new", ""), false)
	if err := spool.Flush(); err != nil {
		t.Fatal(err)
	}

	rd, err := trace.NewReader(buf)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		At      float64
		Pod     string
		Running bool
	}
	var got []line
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the recording does not read back: %v", err)
		}
		got = append(got, line{e.At, e.Pod.Name, e.Running})
	}
	want := []line{{0, "running-1", true}, {0, "running-2", true}, {0, "pending-1", false}, {0, "pending-2", false}, {5, "new", false}}
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("recorded (-want +got):\n%s", d)
	}
}

// A pod recorded with a request whose exponent apimachinery's parser may
// not return on is written bounded, as the controller's cache reads it:
// berth simulate reads the trace (it refuses such a number), and the
// request is what kube-scheduler reads from it.
func TestRecordingBoundsHugeRequests(t *testing.T) {
	huge := resource.MustParse("1e3000000")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "huge"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: huge}}}}}}
	obj, err := prepare(p)
	if err != nil {
		t.Fatal(err)
	}
	rd := tracetest.Reader(t, trace.Header{Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}, &trace.Event{Op: trace.OpCreate, Pod: trace.FromPod(obj.(*corev1.Pod))})
	e, err := rd.Next()
	if err != nil {
		t.Fatalf("the recorded pod does not read back: %v", err)
	}
	got := e.Pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	if got.MilliValue() != huge.MilliValue() {
		t.Errorf("recorded %d millicores, kube-scheduler reads %d", got.MilliValue(), huge.MilliValue())
	}
}

// TestRecordedLaunchDelaysReadBack: a node Ready within half a millisecond
// of being seen, one that took 10 s and one that took two days: the
// trace's header keeps 1 ms and 10 s (what berth simulate reads), not the
// zero or the two days that would make the trace unreadable.
func TestRecordedLaunchDelaysReadBack(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	now := start
	r := &recorder{o: Options{Now: func() time.Time { return now }}, created: map[string]time.Time{}, delays: map[string][]float64{}, start: start}
	node := func(name string, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelNodeGroup: "general"},
			Annotations: map[string]string{v1alpha1.AnnotationLaunchedBy: "uid-general"}}}
		if ready {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}
		return n
	}
	for _, boot := range []time.Duration{100 * time.Microsecond, 10 * time.Second, 48 * time.Hour} {
		name := "n-" + boot.String()
		r.nodeSeen(node(name, false), false)
		now = now.Add(boot)
		r.nodeSeen(node(name, true), false)
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Start: start, LaunchDelays: r.delays})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.NewReader(&buf)
	if err != nil {
		t.Fatalf("the recorded header does not read back: %v", err)
	}
	if got := rd.Header.LaunchDelays["general"]; len(got) != 2 || got[0] != 0.001 || got[1] != 10 {
		t.Errorf("launch delays %v, want [0.001 10]", got)
	}
}

// TestMaxEventsBelowOneIsRefused: --max-events -5 (or 0) is refused at
// once, naming the flag; it meant the default of 2,000,000 events.
func TestMaxEventsBelowOneIsRefused(t *testing.T) {
	for _, v := range []string{"-5", "0"} {
		cmd := NewCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--out", t.TempDir() + "/trace.jsonl", "--max-events", v})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--max-events must be at least 1") {
			t.Errorf("--max-events %s: %v, want it refused", v, err)
		}
	}
}

// A pod whose line would pass trace.MaxLine (thousands of affinity
// values) is left out of the recording and named, and the recording goes
// on: before, the line was written and berth simulate refused the whole
// trace at it.
func TestAPodPastTheLongestLineIsLeftOut(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	now := start
	r, buf, spool := recording(t, start, &now)
	values := make([]string, trace.MaxLine/60)
	for i := range values {
		values[i] = strings.Repeat("v", 60)
	}
	huge := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "huge"}, Spec: corev1.PodSpec{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}}}
	now = start.Add(time.Second)
	r.podAdded(huge, false)
	r.podAdded(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "small"}}, false)
	now = start.Add(2 * time.Second)
	r.podGone("shop", "huge")
	r.podGone("shop", "small")
	if err := spool.Flush(); err != nil {
		t.Fatal(err)
	}
	if r.stopped != "" {
		t.Fatalf("the recording stopped: %s", r.stopped)
	}
	if d := gocmp.Diff([]string{"shop/huge"}, r.skipped); d != "" {
		t.Errorf("pods left out (-want +got):\n%s", d)
	}
	rd, err := trace.NewReader(buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the recording does not read back: %v", err)
		}
		got = append(got, string(e.Op)+" "+e.Key())
	}
	if d := gocmp.Diff([]string{"create shop/small", "delete shop/small"}, got); d != "" {
		t.Errorf("recorded (-want +got):\n%s", d)
	}
	if r.pods != 1 {
		t.Errorf("%d pods counted as recorded, want 1", r.pods)
	}
}

// An event the recording sees past the longest span a trace holds (the
// timer that ends a 90-day recording fires a moment after it) is written
// at the end of the span, where berth simulate reads it.
func TestEventsPastTheSpanAreWrittenAtItsEnd(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	now := start.Add(trace.MaxSpan + 842*time.Millisecond)
	r, buf, spool := recording(t, start, &now)
	r.podAdded(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "late"}}, false)
	if err := spool.Flush(); err != nil {
		t.Fatal(err)
	}
	rd, err := trace.NewReader(buf)
	if err != nil {
		t.Fatal(err)
	}
	e, err := rd.Next()
	if err != nil {
		t.Fatalf("the late event does not read back: %v", err)
	}
	if e.At != trace.MaxSpan.Seconds() {
		t.Errorf("written at %v s, want the span's end %v", e.At, trace.MaxSpan.Seconds())
	}
}
