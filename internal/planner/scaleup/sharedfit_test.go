package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPodsOfEqualRequestsShareNothingElse: the planner answers once which
// instance types hold a pod of given requests, for every pod of those
// requests, while no limit is near. A pod with the same cpu but more
// memory, or a pod of the same requests once a limit leaves fewer types,
// gets its own answer.
func TestPodsOfEqualRequestsShareNothingElse(t *testing.T) {
	// No type holds 2 cpu and 4Gi, though the largest of each does.
	lopsided := b.NodeGroup("lopsided", b.InstanceType("cpu-4", "4", "1Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("mem-8", "1", "8Gi", b.OnDemand("zone-a", "0.10")))
	limited := b.NodeGroup("limited", b.InstanceType("c-8", "8", "32Gi", b.OnDemand("zone-a", "0.32")),
		b.InstanceType("c-1", "1", "4Gi", b.OnDemand("zone-a", "0.04")),
		b.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}))
	apart := b.PodAntiAffinity(b.AffinityTerm(hostname, "app", "w"))
	runPlanCases(t, []planCase{
		{name: "a pod whose memory no type holds is unschedulable next to one of equal cpu that fits",
			groups:  []*v1alpha1.NodeGroup{lopsided},
			pending: []*corev1.Pod{b.Pod("fits", b.CPU("2"), b.Memory("512Mi")), b.Pod("too-much-memory", b.CPU("2"), b.Memory("4Gi"))},
			want:    []string{"new zone-a/on-demand/cpu-4: fits", "unschedulable: too-much-memory"}},
		{name: "a second pod of equal requests is not planned beyond the group's cpu limit",
			groups:  []*v1alpha1.NodeGroup{limited},
			pending: replicas("w", 2, b.CPU("3"), b.Labels("app", "w"), apart),
			want:    []string{"new zone-a/on-demand/c-8: w-1", "unschedulable: w-2"}},
	})
}
