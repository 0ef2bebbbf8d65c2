package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestAPodLevelResizeIsNotSharedWithASiblingPod: two replicas of one
// Deployment (same labels, same spec: pod-level requests of 1 cpu, after
// an in-place resize lowered them from 2) run on a 4-cpu node. One has
// finished the resize; the other still runs with 2 cpu (actuated and
// allocated 2, resize in progress). kube-scheduler counts 1 + 2 = 3 cpu,
// so a pending pod of 1500m needs a new node. The class fingerprint
// leaves pod-level status resources out: both replicas share one class,
// and the one seen first decides what the other requests.
func TestAPodLevelResizeIsNotSharedWithASiblingPod(t *testing.T) {
	general := b.NodeGroup("general", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")))
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	two := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	replica := func(name string) *corev1.Pod {
		p := boundTo(b.Pod(name, b.Labels("app", "web")), "n1")
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: one}
		return p
	}
	done, resizing := replica("web-1"), replica("web-2")
	resizing.Status.Resources = &corev1.ResourceRequirements{Requests: two}
	resizing.Status.AllocatedResources = two
	resizing.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
	node := groupNode("n1", general, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	want := []string{"new zone-a/on-demand/m-4: p"}
	runPlanCases(t, []planCase{
		{name: "the resizing replica alone", groups: []*v1alpha1.NodeGroup{general}, nodes: []*corev1.Node{node},
			bound: []*corev1.Pod{resizing}, pending: []*corev1.Pod{b.Pod("p", b.CPU("2500m"))}, want: want},
		{name: "the resizing replica listed after its sibling", groups: []*v1alpha1.NodeGroup{general}, nodes: []*corev1.Node{node},
			bound: []*corev1.Pod{done, resizing}, pending: []*corev1.Pod{b.Pod("p", b.CPU("1500m"))}, want: want},
	})
}
