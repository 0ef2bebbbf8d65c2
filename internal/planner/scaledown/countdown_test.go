package scaledown_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestACountdownFollowsThePlan: a node planned removed, replaced or held
// back while removable (Blocked.Waits: its budget, a finishing pod)
// counts from the first round it was; one whose pods have no home any
// more, or that the plan does not name, stops counting.
func TestACountdownFollowsThePlan(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	c := scaledown.Countdown{"removed": t0, "held": t0, "no-home": t0, "no-home-held": t0, "gone": t0}
	c.Follow(&scaledown.Plan{
		Remove:  []scaledown.Removal{{Node: "removed"}, {Node: "new"}},
		Replace: []scaledown.Replacement{{Nodes: []string{"replaced"}}},
		Blocked: []scaledown.Blocked{
			{Node: "held", Reason: scaledown.ReasonBudget, Waits: true},
			{Node: "held-new", Reason: scaledown.ReasonBudget, Waits: true},
			{Node: "no-home", Reason: scaledown.ReasonNoHome},
			{Node: "no-home-held", Reason: scaledown.ReasonBudget},
		},
	}, now)
	want := scaledown.Countdown{"removed": t0, "new": now, "replaced": now, "held": t0, "held-new": now}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("countdown (-want +got):\n%s", diff)
	}
}

// TestANodeHoldingHeadroomGoesLast: with a budget of one, of two nodes
// that could each go, the one running a headroom placeholder stays even
// though it is the less used: its removal would leave the headroom
// unready until its placeholder runs again elsewhere.
func TestANodeHoldingHeadroomGoesLast(t *testing.T) {
	one := intstr.FromInt32(1)
	ng := group("g", func(ng *v1alpha1.NodeGroup) { ng.Spec.Disruption.Budget = &one })
	placeholder := b.Pod("spare-0", b.NodeName("a"), b.CPU("500m"), b.OwnedBy("ReplicaSet", "spare"), b.Labels(v1alpha1.LabelHeadroomRole, "placeholder"), b.Phase(corev1.PodRunning))
	got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng},
		Nodes: []*corev1.Node{node("a", ng), node("b", ng), node("c", ng)},
		Pods:  []*corev1.Pod{placeholder, app("web-b", "b", "1"), app("web-c", "c", "3")}})
	if !slices.Equal(got.removed, []string{"b"}) {
		t.Errorf("removed %v, want b (a holds the headroom placeholder)", got.removed)
	}
}
