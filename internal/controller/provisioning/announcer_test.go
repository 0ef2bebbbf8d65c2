package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestAnnouncerSaysEachChangeOnce: the same message twice is one event;
// a new message is another; a forgotten key may be told again.
func TestAnnouncerSaysEachChangeOnce(t *testing.T) {
	rec := &fakes.Recorder{}
	a := newAnnouncer[string](rec)
	pod := b.Pod("p")
	a.say("p", pod, corev1.EventTypeNormal, "R", "A", "launching n1")
	a.say("p", pod, corev1.EventTypeNormal, "R", "A", "launching n1")
	a.say("p", pod, corev1.EventTypeNormal, "R", "A", "launching n2")
	if n := len(rec.Events); n != 2 {
		t.Fatalf("%d events, want 2 (one per change)", n)
	}
	a.retain(func(string) bool { return false })
	a.say("p", pod, corev1.EventTypeNormal, "R", "A", "launching n2")
	if n := len(rec.Events); n != 3 {
		t.Errorf("%d events after the key was forgotten, want 3", n)
	}
}

// TestSchedulableSince: a node is remembered from the first time it is
// seen schedulable, and forgotten once it is gone.
func TestSchedulableSince(t *testing.T) {
	s := newSchedulableSince()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	up, booting := b.Node("up", "1", "1Gi"), b.Node("booting", "1", "1Gi", b.NotReady())
	known := s.observe([]*corev1.Node{up, booting}, t0)
	if !known["up"] || !known["booting"] {
		t.Fatalf("known %v, want both nodes", known)
	}
	s.observe([]*corev1.Node{up, booting}, t0.Add(time.Minute))
	if at, ok := s.of("up"); !ok || !at.Equal(t0) {
		t.Errorf("up since %v %v, want the first time it was seen", at, ok)
	}
	if _, ok := s.of("booting"); ok {
		t.Error("a node that is not schedulable has a time")
	}
	s.observe(nil, t0.Add(2*time.Minute))
	if _, ok := s.of("up"); ok {
		t.Error("a node that is gone is still remembered")
	}
}
