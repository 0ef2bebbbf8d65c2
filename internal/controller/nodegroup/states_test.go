package nodegroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

func TestNodesByState(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("g", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.UID = "uid-g"
	mine := func(name string, opts ...b.NodeOption) corev1.Node {
		return *b.Node(name, "2", "8Gi", append([]b.NodeOption{b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "m-2",
			v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")}, opts...)...)
	}
	initialized := b.NodeLabels(v1alpha1.LabelInitialized, "true")
	nodes := []corev1.Node{
		mine("ready", initialized),
		mine("launching", b.NotReady(), func(n *corev1.Node) { delete(n.Labels, v1alpha1.LabelInitialized) }),
		mine("lost", b.NotReady(), initialized),
		mine("draining", initialized, b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)),
		mine("interrupted", initialized, b.NodeTaint(v1alpha1.TaintInterruption, "", corev1.TaintEffectNoSchedule)),
		mine("drifted", initialized, b.NodeLabels(v1alpha1.LabelInstanceType, "gone-8")),
	}
	want := v1alpha1.NodesByState{Ready: 4, Launching: 1, NotReady: 1, Draining: 1, Interrupted: 1, Drifted: 1}
	if diff := cmp.Diff(want, nodesByState(ng, nodes, now, 15*time.Minute)); diff != "" {
		t.Errorf("nodes by state (-want +got):\n%s", diff)
	}
}
