package scaledown_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestNodesAsGoodAsGoneUseNoBudget: ten empty nodes and a budget of one.
// A node of the group that is as good as gone must not hold that one
// removal back, as Karpenter counts in its budgets only nodes that came
// up and whose instance is not terminating (suite_test.go "should not
// consider nodes that are not initialized / that have the terminating
// status condition as part of disruption count"):
//   - a node that never came up, being deleted (a failed boot the launch
//     timeout deletes, held by a slow finalizer);
//   - a node drained and whose removal its provider accepted
//     (berth.dev/removal-accepted): only its Node object lingers, for
//     minutes with Cluster API.
//
// A node that came up and is being deleted (its pods evicted by whoever
// deletes it) still uses the budget; and none of them counts as staying
// for the group's minSize. (Found comparing with Karpenter's disruption
// suite.)
func TestNodesAsGoodAsGoneUseNoBudget(t *testing.T) {
	deleting := func(n *corev1.Node) {
		n.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		n.Finalizers = []string{"example.com/hold"}
	}
	accepted := func(ng *v1alpha1.NodeGroup) *corev1.Node {
		at := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		return node("other", ng, b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule),
			b.NodeAnnotation(v1alpha1.AnnotationDisruptionStarted, at), b.NodeAnnotation(v1alpha1.AnnotationRemovalAccepted, at))
	}
	tests := []struct {
		name    string
		other   func(ng *v1alpha1.NodeGroup) *corev1.Node
		minSize int32
		want    int
	}{
		{name: "a booting node being deleted", want: 1, other: func(ng *v1alpha1.NodeGroup) *corev1.Node {
			return node("other", ng, b.Booting(), deleting)
		}},
		{name: "a node whose removal the provider accepted", want: 1, other: accepted},
		{name: "a node up being deleted", want: 0, other: func(ng *v1alpha1.NodeGroup) *corev1.Node {
			return node("other", ng, deleting)
		}},
		{name: "a node whose removal was accepted, the group at its minSize", minSize: 10, want: 0, other: accepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ng := group("ten", func(ng *v1alpha1.NodeGroup) {
				one := intstr.FromInt32(1)
				ng.Spec.Disruption.Budget = &one
				ng.Spec.MinSize = tt.minSize
			})
			var nodes []*corev1.Node
			for i := range 10 {
				nodes = append(nodes, node(fmt.Sprintf("n%02d", i), ng))
			}
			nodes = append(nodes, tt.other(ng))
			got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes})
			if len(got.removed) != tt.want {
				t.Errorf("%d nodes removed (%v, n00 %v), want %d beside %s", len(got.removed), got.removed, got.blocked["n00"], tt.want, tt.name)
			}
		})
	}
}
