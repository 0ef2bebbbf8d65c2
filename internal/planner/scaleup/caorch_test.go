package scaleup_test

// Cases from Cluster Autoscaler's scale-up orchestrator and resource
// quota tracker (pkg/core/scaleup/orchestrator, pkg/resourcequotas).

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestANodeWithoutALimitedResourceIsNotHeldByThatLimit (Cluster
// Autoscaler's tracker: a resource the node does not have is not
// checked, resourcequotas/tracker.go "resourceDelta <= 0"): group ml
// offers a GPU type and a CPU-only type, spec.limits caps its GPUs at 2;
// it runs 3 GPU nodes (the limit was lowered from 4). A pod asking no GPU
// gets a CPU-only node: that node adds no GPU, so it does not pass the
// GPU limit further. With the group at its limit (2 GPU nodes) it does
// (control).
func TestANodeWithoutALimitedResourceIsNotHeldByThatLimit(t *testing.T) {
	ml := b.NodeGroup("ml", b.Size(0, 10),
		b.InstanceType("gpu-4", "4", "16Gi", b.OnDemand("zone-a", "0.90")), b.ExtraCapacity("nvidia.com/gpu", "1"),
		b.InstanceType("cpu-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.GroupLimits(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}))
	gpuNodes := func(n int) ([]*corev1.Node, []*corev1.Pod) {
		var nodes []*corev1.Node
		var pods []*corev1.Pod
		for i := range n {
			name := fmt.Sprintf("gpu-%d", i)
			nd := groupNode(name, ml, "gpu-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
			b.LaunchedBy(ml)(nd)
			b.NodeAllocatable("nvidia.com/gpu", "1")(nd)
			nodes = append(nodes, nd)
			pods = append(pods, boundTo(b.Pod("train-"+name, b.CPU("4"), b.Request("nvidia.com/gpu", "1")), name))
		}
		return nodes, pods
	}
	atLimit, atLimitPods := gpuNodes(2)
	over, overPods := gpuNodes(3)
	runPlanCases(t, []planCase{
		{
			name:   "the group at its GPU limit (control)",
			groups: []*v1alpha1.NodeGroup{ml}, nodes: atLimit, bound: atLimitPods,
			pending: []*corev1.Pod{b.Pod("web", b.CPU("2"))},
			want:    []string{"new zone-a/on-demand/cpu-4: web"},
		},
		{
			name:   "the group past its GPU limit",
			groups: []*v1alpha1.NodeGroup{ml}, nodes: over, bound: overPods,
			pending: []*corev1.Pod{b.Pod("web", b.CPU("2"))},
			want:    []string{"new zone-a/on-demand/cpu-4: web"},
		},
	})
}

// TestCAOrchestratorCasesAgree: Cluster Autoscaler's orchestrator and
// binpacking estimator cases, mapped to berth's groups and limits.
func TestCAOrchestratorCasesAgree(t *testing.T) {
	ng := func(name string, cpu, mem string, opts ...b.NodeGroupOption) *v1alpha1.NodeGroup {
		return b.NodeGroup(name, append([]b.NodeGroupOption{b.InstanceType(name+"-t", cpu, mem, b.OnDemand("zone-a", "0.1"))}, opts...)...)
	}
	node := func(name string, g *v1alpha1.NodeGroup) *corev1.Node {
		n := groupNode(name, g, g.Spec.InstanceTypes[0].Name, "zone-a", v1alpha1.CapacityTypeOnDemand)
		b.LaunchedBy(g)(n)
		return n
	}
	type lc struct {
		planCase
		limits corev1.ResourceList
	}
	ng1, ng2 := ng("ng1", "2", "100Mi"), ng("ng2", "4", "1000Mi")
	ng1at1 := ng("ng1", "2", "2Gi", b.Size(0, 1))
	ng2at2 := ng("ng2", "1", "1Gi", b.Size(0, 2))
	zero := ng("zero", "8", "32Gi", b.Size(0, 0))
	quota := ng("ng1", "2", "2Gi", b.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}))
	minNG := ng("ng1", "16", "32Gi", b.Size(3, 10))
	unmanaged := b.Node("n2", "4", "1000Mi")
	cases := []lc{
		{planCase: planCase{name: "TestScaleUpMaxCoresLimitHit", groups: []*v1alpha1.NodeGroup{ng1, ng2},
			nodes:   []*corev1.Node{node("n1", ng1), node("n2", ng2)},
			bound:   []*corev1.Pod{boundTo(b.Pod("p1", b.CPU("1")), "n1"), boundTo(b.Pod("p2", b.CPU("3")), "n2")},
			pending: []*corev1.Pod{b.Pod("p-new-1", b.CPU("2")), b.Pod("p-new-2", b.CPU("2"))},
			want:    []string{"new zone-a/on-demand/ng1-t: p-new-1", "unschedulable: p-new-2"}},
			limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9")}},
		{planCase: planCase{name: "TestScaleUpMaxCoresLimitHitWithNotAutoscaledGroup", groups: []*v1alpha1.NodeGroup{ng1},
			nodes:   []*corev1.Node{node("n1", ng1), unmanaged},
			bound:   []*corev1.Pod{boundTo(b.Pod("p1", b.CPU("1")), "n1"), boundTo(b.Pod("p2", b.CPU("3")), "n2")},
			pending: []*corev1.Pod{b.Pod("p-new-1", b.CPU("2")), b.Pod("p-new-2", b.CPU("2"))},
			want:    []string{"new zone-a/on-demand/ng1-t: p-new-1", "unschedulable: p-new-2"}},
			limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9")}},
		{planCase: planCase{name: "TestScaleUpMaxMemoryLimitHit", groups: []*v1alpha1.NodeGroup{ng1, ng2},
			nodes:   []*corev1.Node{node("n1", ng1), node("n2", ng2)},
			bound:   []*corev1.Pod{boundTo(b.Pod("p1", b.CPU("1")), "n1"), boundTo(b.Pod("p2", b.CPU("3")), "n2")},
			pending: []*corev1.Pod{b.Pod("p-new-1", b.CPU("2"), b.Memory("100Mi")), b.Pod("p-new-2", b.CPU("2"), b.Memory("100Mi")), b.Pod("p-new-3", b.CPU("2"), b.Memory("100Mi"))},
			want:    []string{"new zone-a/on-demand/ng1-t: p-new-1", "new zone-a/on-demand/ng1-t: p-new-2", "unschedulable: p-new-3"}},
			limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1300Mi")}},
		{planCase: planCase{name: "TestNoScaleUpMaxCoresLimitHit", groups: []*v1alpha1.NodeGroup{ng1, ng2},
			nodes:   []*corev1.Node{node("n1", ng1), node("n2", ng2)},
			bound:   []*corev1.Pod{boundTo(b.Pod("p1", b.CPU("1")), "n1"), boundTo(b.Pod("p2", b.CPU("3")), "n2")},
			pending: []*corev1.Pod{b.Pod("p-new-1", b.CPU("2")), b.Pod("p-new-2", b.CPU("2"))},
			want:    []string{"unschedulable: p-new-1,p-new-2"}},
			limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}},
		{planCase: planCase{name: "TestScaleUpWithMultipleQuotas capped by quota", groups: []*v1alpha1.NodeGroup{quota},
			nodes:   []*corev1.Node{node("n1", quota)},
			bound:   []*corev1.Pod{boundTo(b.Pod("p0", b.CPU("2")), "n1")},
			pending: []*corev1.Pod{b.Pod("p1", b.CPU("2")), b.Pod("p2", b.CPU("2")), b.Pod("p3", b.CPU("2"))},
			want:    []string{"new zone-a/on-demand/ng1-t: p1", "new zone-a/on-demand/ng1-t: p2", "unschedulable: p3"}}},
		{planCase: planCase{name: "TestScaleUpSimulationForSkippedNodeGroups", groups: []*v1alpha1.NodeGroup{ng1at1, ng2at2},
			nodes:   []*corev1.Node{node("n1", ng1at1), node("n2", ng2at2)},
			bound:   []*corev1.Pod{boundTo(b.Pod("b1", b.CPU("2")), "n1"), boundTo(b.Pod("b2", b.CPU("1")), "n2")},
			pending: []*corev1.Pod{b.Pod("p1", b.CPU("1500m")), b.Pod("p2", b.CPU("3")), b.Pod("p3", b.CPU("500m"))},
			want:    []string{"new zone-a/on-demand/ng2-t: p3", "unschedulable: p1,p2"}}},
		{planCase: planCase{name: "a group of max 0", groups: []*v1alpha1.NodeGroup{zero},
			pending: []*corev1.Pod{b.Pod("p", b.CPU("1"))}, want: []string{"unschedulable: p"}}},
		{planCase: planCase{name: "TestScaleUpToMeetNodeGroupMinSize", groups: []*v1alpha1.NodeGroup{minNG},
			nodes: []*corev1.Node{node("n1", minNG), b.Node("n2", "16", "32Gi")},
			want:  []string{"new zone-a/on-demand/ng1-t: "}},
			limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("48")}},
		{planCase: planCase{name: "estimator: hostport conflict forces pod-per-node", groups: []*v1alpha1.NodeGroup{ng("g", "1", "5Gi")},
			pending: replicas("e", 3, b.CPU("200m"), b.HostPort(5555, corev1.ProtocolTCP)),
			want:    []string{"new zone-a/on-demand/g-t: e-1", "new zone-a/on-demand/g-t: e-2", "new zone-a/on-demand/g-t: e-3"}}},
		{planCase: planCase{name: "estimator: simple resource-based binpacking", groups: []*v1alpha1.NodeGroup{ng("g", "1", "2Gi")},
			pending: replicas("e", 4, b.CPU("350m"), b.Memory("1Gi")),
			want:    []string{"new zone-a/on-demand/g-t: e-1,e-2", "new zone-a/on-demand/g-t: e-3,e-4"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: tc.groups, Nodes: tc.nodes, Pods: tc.bound, Pending: tc.pending, Limits: scaleup.Limits{Resources: tc.limits}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
				for _, u := range plan.Unschedulable {
					t.Logf("%s: %s", u.Pod.Name, u.Message)
				}
			}
		})
	}
}

// TestAVirtualKubeletNodeDoesNotCountInTheClusterLimits (Cluster
// Autoscaler's VirtualKubeletNodeFilter, core/utils/utils.go: a node
// labelled type=virtual-kubelet "may have lots of resource and exceed the
// total resource limit", and is left out of the quota usage): an AKS
// virtual node (ACI) advertises 10k cpu and 4Ti memory, tainted for the
// pods that choose it: here more than the default cluster limits (320k
// cpu, 6400000Gi). A web pod still gets a node of group g.
func TestAVirtualKubeletNodeDoesNotCountInTheClusterLimits(t *testing.T) {
	g := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	virtual := b.Node("virtual-node-aci-linux", "400k", "8000000Gi", b.NodeLabels("type", "virtual-kubelet"),
		b.NodeTaint("virtual-kubelet.io/provider", "azure", corev1.TaintEffectNoSchedule))
	runPlanCases(t, []planCase{{
		name: "an ACI virtual node", groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{virtual},
		pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))},
		want:    []string{"new zone-a/on-demand/m-4: web"},
	}})
}
