package state_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/state"
)

func TestHolds(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	h := state.NewHolds()
	var changed []string
	h.OnChange = func(g string) { changed = append(changed, g) }
	if h.Published() {
		t.Fatal("a new store says it was published: scale-down would not wait for the provisioner's first round")
	}

	h.LaunchFailed(a, "gpu", "no capacity")
	h.Publish(map[types.NamespacedName]bool{a: true, b: true}, map[types.NamespacedName]string{b: "web"})
	if !h.Published() {
		t.Fatal("not published after Publish")
	}
	if hold, ok := h.Of("gpu"); !ok || hold.Reason != state.HoldLaunchFailed || hold.Pod != a {
		t.Errorf("gpu hold %+v %v, want a launch failure for ns/a", hold, ok)
	}
	if hold, ok := h.Of("web"); !ok || hold.Reason != state.HoldLaunching || hold.Pod != b {
		t.Errorf("web hold %+v %v, want a launch for ns/b", hold, ok)
	}
	if _, ok := h.Of("other"); ok {
		t.Error("a group nobody waits for is held")
	}
	if !slices.Equal(changed, []string{"gpu", "web"}) {
		t.Errorf("changes %v, want [gpu web]", changed)
	}

	// b is bound, a still waits: web is free, gpu still held.
	changed = nil
	h.Publish(map[types.NamespacedName]bool{a: true}, map[types.NamespacedName]string{b: "web"})
	if _, ok := h.Of("web"); ok {
		t.Error("web still held after its pod was bound")
	}
	if _, ok := h.Of("gpu"); !ok {
		t.Error("gpu no longer held while the pod whose launch failed still waits")
	}
	if !slices.Equal(changed, []string{"web"}) {
		t.Errorf("changes %v, want [web]", changed)
	}

	// a is scheduled: the failure is forgotten, a new round for a does not
	// bring it back.
	h.Publish(nil, nil)
	h.Publish(map[types.NamespacedName]bool{a: true}, nil)
	if _, ok := h.Of("gpu"); ok {
		t.Error("gpu held again by a failure forgotten when its pod was scheduled")
	}
}

// TestALaunchFailureHoldsItsGroupForTheLimitOnly: a pod whose launches
// keep failing (no offering can take it) holds its group's removals for
// the limit from its first failure there, not for as long as it waits; a
// failure again later does not start the hold again. Once the pod was
// scheduled, a new failure holds anew.
func TestALaunchFailureHoldsItsGroupForTheLimitOnly(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := state.NewHoldsFor(clk, 15*time.Minute)
	waits := map[types.NamespacedName]bool{a: true}

	h.LaunchFailed(a, "gpu", "no capacity")
	h.Publish(waits, nil)
	hold, ok := h.Of("gpu")
	if !ok || !strings.Contains(hold.Message, "2026-12-01T12:15:00Z") {
		t.Fatalf("gpu hold %+v %v, want one that says it ends at 12:15", hold, ok)
	}
	clk.SetTime(clk.Now().Add(14 * time.Minute))
	h.LaunchFailed(a, "gpu", "no capacity again")
	h.Publish(waits, nil)
	if _, ok := h.Of("gpu"); !ok {
		t.Fatal("gpu not held 14 minutes after the first failure, the limit being 15")
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	h.Publish(waits, nil)
	if hold, ok := h.Of("gpu"); ok {
		t.Fatalf("gpu still held 15 minutes after the first failure: %+v", hold)
	}
	clk.SetTime(clk.Now().Add(3 * time.Minute))
	h.LaunchFailed(a, "gpu", "no capacity, third try")
	h.Publish(waits, nil)
	if hold, ok := h.Of("gpu"); ok {
		t.Fatalf("gpu held again by a later failure of the same waiting pod: %+v", hold)
	}

	h.Publish(nil, nil) // a is scheduled
	h.LaunchFailed(a, "gpu", "no capacity")
	h.Publish(waits, nil)
	if _, ok := h.Of("gpu"); !ok {
		t.Fatal("gpu not held by a failure after the pod was scheduled and waits again")
	}
}
