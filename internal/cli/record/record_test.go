package record

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/testing/tracetest"
	"github.com/berth-dev/berth/internal/trace"
)

// A recording begins with the pods bound when it started, marked
// running, then the pods pending then, then what happened after: the
// informer hands the pods of its first list in any order, and a trace
// whose running pods came after another event would be refused by
// berth simulate.
func TestRecordingBeginsWithTheRunningPods(t *testing.T) {
	var buf bytes.Buffer
	spool, err := trace.NewWriter(&buf, trace.Header{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	now := start
	r := &recorder{o: Options{MaxEvents: 100, Now: func() time.Time { return now }}, live: map[string]bool{},
		full: make(chan struct{}), spool: spool, start: start}
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

	rd, err := trace.NewReader(&buf)
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
	rd := tracetest.Reader(t, trace.Header{}, &trace.Event{Op: trace.OpCreate, Pod: trace.FromPod(obj.(*corev1.Pod))})
	e, err := rd.Next()
	if err != nil {
		t.Fatalf("the recorded pod does not read back: %v", err)
	}
	got := e.Pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	if got.MilliValue() != huge.MilliValue() {
		t.Errorf("recorded %d millicores, kube-scheduler reads %d", got.MilliValue(), huge.MilliValue())
	}
}
