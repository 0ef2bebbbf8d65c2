package record

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
