package scaleup_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestNothingPending: a round with no pending pod plans nothing, unless a
// group has fewer nodes than its minSize, which it fills; a node listed
// twice is refused as when pods are pending.
func TestNothingPending(t *testing.T) {
	ng := b.NodeGroup("min", b.Size(2, 5), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")))
	node := func(name string) *corev1.Node {
		return groupNode(name, ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{name: "a group below minSize gets the nodes it lacks", nodes: []*corev1.Node{node("a")}, want: []string{"new zone-a/on-demand/m-4 minSize"}},
		{name: "a group at minSize gets nothing", nodes: []*corev1.Node{node("a"), node("b")}, want: nil},
		{name: "nodes of another group do not count for it", nodes: []*corev1.Node{node("a"), b.Node("other", "4", "16Gi")},
			want: []string{"new zone-a/on-demand/m-4 minSize"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: tc.nodes})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range plan.NewNodes {
				got = append(got, "new "+n.Zone+"/"+n.CapacityType+"/"+n.InstanceType+" "+n.Reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("new nodes (-want +got):\n%s", diff)
			}
			if len(plan.ExistingNodePlacements)+len(plan.Unschedulable) != 0 {
				t.Errorf("plan places or explains pods though none is pending: %+v", plan)
			}
		})
	}
	t.Run("a node listed twice is an error", func(t *testing.T) {
		if _, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{node("a"), node("b"), node("a")}}); err == nil {
			t.Error("no error for a node listed twice")
		}
	})
}
