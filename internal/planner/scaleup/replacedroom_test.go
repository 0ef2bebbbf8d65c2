package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestAPendingPodDoesNotTakeTheRoomOfASecondReplacement: a drifted
// node whose pods need two new nodes is marked replaced-by "new-1,new-2"
// (lifecycle.go joins every node launched for it). Its pods (3 + 3 cpu)
// take their room on both; a pod that comes while they boot must get a
// node of its own, as with one replacement.
func TestAPendingPodDoesNotTakeTheRoomOfASecondReplacement(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.10")))
	ng.UID = "uid-g"
	old := b.Node("old", "8", "32Gi", b.LaunchedBy(ng), b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "new-1,new-2"))
	labels := b.NodeLabels(v1alpha1.LabelInstanceType, "m-4", v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	n1 := b.Node("new-1", "4", "16Gi", b.LaunchedBy(ng), b.Booting(), labels)
	n2 := b.Node("new-2", "4", "16Gi", b.LaunchedBy(ng), b.Booting(), labels)
	bound := []*corev1.Pod{
		boundTo(b.Pod("web-1", b.CPU("3"), b.OwnedBy("ReplicaSet", "web")), "old"),
		boundTo(b.Pod("web-2", b.CPU("3"), b.OwnedBy("ReplicaSet", "web")), "old"),
	}
	runPlanCases(t, []planCase{{
		name:    "a pod that comes while the two replacements boot",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{old, n1, n2},
		bound:   bound,
		pending: []*corev1.Pod{b.Pod("late", b.CPU("2"), b.OwnedBy("ReplicaSet", "late"))},
		want:    []string{"new zone-a/on-demand/m-4: late"},
	}})
}
