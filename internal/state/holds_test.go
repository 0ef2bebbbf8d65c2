package state_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

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
