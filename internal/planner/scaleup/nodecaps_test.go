package scaleup_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestNodeCapsBoundTheNodesLaunched: --max-nodes-total caps the nodes of
// the cluster (every node but a virtual kubelet's, those of no group and
// those being deleted included, as Cluster Autoscaler's counts them) and
// --max-nodes-per-round the nodes one plan launches. Each of the five
// pods needs a node of its own; the pods the caps leave out wait with the
// cap named, and a minSize fill stays within them too.
func TestNodeCapsBoundTheNodesLaunched(t *testing.T) {
	g := b.NodeGroup("g", b.Size(0, 100), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	filled := b.NodeGroup("filled", b.Size(3, 100), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	var pending []*corev1.Pod
	for i := range 5 {
		pending = append(pending, b.Pod(fmt.Sprintf("p%d", i), b.CPU("3")))
	}
	small := b.Node("other", "1", "4Gi") // of no group, too small for any pod
	deleting := groupNode("going", g, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"berth.dev/termination"}
	deleting.Spec.Unschedulable = true
	virtual := b.Node("virtual-node-aci-linux", "10k", "4Ti", b.NodeLabels("type", "virtual-kubelet"),
		b.NodeTaint("virtual-kubelet.io/provider", "azure", corev1.TaintEffectNoSchedule))
	for _, tc := range []struct {
		name     string
		groups   []*v1alpha1.NodeGroup
		nodes    []*corev1.Node
		pending  []*corev1.Pod
		caps     scaleup.NodeCaps
		launched int
		why      string // in every waiting pod's message
	}{
		{name: "no cap", groups: []*v1alpha1.NodeGroup{g}, pending: pending, launched: 5},
		{name: "the cluster's cap counts the nodes of no group and those being deleted, not a virtual kubelet's",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{small, deleting, virtual}, pending: pending,
			caps: scaleup.NodeCaps{Total: 4}, launched: 2, why: "g: cluster at its cap of 4 nodes (4 nodes; --max-nodes-total)"},
		{name: "a cluster past its cap launches nothing", groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{small, deleting},
			pending: pending, caps: scaleup.NodeCaps{Total: 1}, launched: 0, why: "--max-nodes-total"},
		{name: "a round's cap", groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{small}, pending: pending,
			caps: scaleup.NodeCaps{Total: 10, PerRound: 3}, launched: 3, why: "g: round at its cap of 3 nodes launched (--max-nodes-per-round"},
		{name: "a minSize fill within the cluster's cap", groups: []*v1alpha1.NodeGroup{filled}, caps: scaleup.NodeCaps{Total: 2}, launched: 2},
		{name: "a minSize fill within the round's cap", groups: []*v1alpha1.NodeGroup{filled}, caps: scaleup.NodeCaps{PerRound: 1}, launched: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := snapshot.NewBase()
			// Once from scratch, then twice as a controller plans, on a
			// model kept from round to round: a round's planned nodes
			// must not count in the next.
			for round, b := range []*snapshot.Base{nil, base, base} {
				plan, err := scaleup.Run(scaleup.Input{NodeGroups: tc.groups, Nodes: tc.nodes, Pending: tc.pending, Limits: scaleup.Limits{Nodes: tc.caps}, Base: b})
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.NewNodes) != tc.launched {
					t.Errorf("round %d: %d new nodes, want %d", round, len(plan.NewNodes), tc.launched)
				}
				if got, want := len(plan.Unschedulable), max(0, len(tc.pending)-tc.launched); got != want {
					t.Errorf("round %d: %d pods wait, want %d", round, got, want)
				}
				for _, u := range plan.Unschedulable {
					if !strings.Contains(u.Message, tc.why) {
						t.Errorf("round %d: pod %s waits with %q, want it to name %q", round, u.Pod.Name, u.Message, tc.why)
					}
				}
			}
		})
	}
}
