package scaleup_test

// Cases from Cluster Autoscaler's scale-up (core/scaleup/orchestrator,
// processors/nodeinfosprovider) and Karpenter's in-flight nodes: what a
// new or launching node has, minSize nodes, and what a pod is told of
// the groups that cannot take it.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestANewNodeIsLikeTheGroupsNodesOfItsType: a group's type says 4 cpu
// and nothing of pods or ephemeral-storage (the Cluster API capacity
// annotations, or a NodeGroup written from the cloud's catalogue); its
// nodes register with what the kubelet makes allocatable (kube-reserved
// and the eviction threshold off, 29 pods on the cloud's network, a 100Gi
// disk). As Cluster Autoscaler plans with a Ready node of the group as
// its template once one exists, a pod of 3950m gets no node (one would
// be launched each round, the pod never fitting), 40 small pods need two
// nodes, and a pod asking for disk gets one.
func TestANewNodeIsLikeTheGroupsNodesOfItsType(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	registered := func(name, cpu, pods string) *corev1.Node {
		n := groupNode(name, ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
		b.LaunchedBy(ng)(n)
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
		n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse(pods)
		n.Status.Capacity[corev1.ResourcePods] = resource.MustParse(pods)
		return n
	}
	withDisk := func(n *corev1.Node, q string) *corev1.Node {
		b.NodeAllocatable(corev1.ResourceEphemeralStorage, q)(n)
		return n
	}
	gpu := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")), b.ExtraCapacity("nvidia.com/gpu", "2"))
	withGPUs := func(n *corev1.Node, q string) *corev1.Node {
		b.NodeAllocatable("nvidia.com/gpu", q)(n)
		return n
	}
	notReady := func(n *corev1.Node) *corev1.Node {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		return n
	}
	small := func(n int, prefix string, node string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			p := b.Pod(fmt.Sprintf("%s-%02d", prefix, i), b.CPU("50m"))
			if node != "" {
				p = boundTo(p, node)
			}
			out = append(out, p)
		}
		return out
	}
	runPlanCases(t, []planCase{
		{
			name:    "a pod larger than what the group's nodes have",
			groups:  []*v1alpha1.NodeGroup{ng},
			nodes:   []*corev1.Node{registered("g-1", "3920m", "110"), registered("g-2", "3920m", "110")},
			pending: []*corev1.Pod{b.Pod("big", b.CPU("3950m"))},
			want:    []string{"unschedulable: big"},
		},
		{
			name:    "a pod the group's nodes hold gets one (control)",
			groups:  []*v1alpha1.NodeGroup{ng},
			nodes:   []*corev1.Node{registered("g-1", "3920m", "110")},
			bound:   []*corev1.Pod{boundTo(b.Pod("there", b.CPU("1")), "g-1")},
			pending: []*corev1.Pod{b.Pod("fits", b.CPU("3900m"))},
			want:    []string{"new zone-a/on-demand/m-4: fits"},
		},
		{
			name:    "the type does not say its ephemeral-storage, the group's nodes have 100Gi",
			groups:  []*v1alpha1.NodeGroup{ng},
			nodes:   []*corev1.Node{withDisk(registered("g-1", "4", "110"), "100Gi")},
			bound:   []*corev1.Pod{boundTo(b.Pod("there", b.CPU("4")), "g-1")},
			pending: []*corev1.Pod{b.Pod("scratch", b.CPU("1"), b.Request(corev1.ResourceEphemeralStorage, "1Gi"))},
			want:    []string{"new zone-a/on-demand/m-4: scratch"},
		},
		{
			name:    "a node one of whose GPUs failed does not take it off the nodes launched",
			groups:  []*v1alpha1.NodeGroup{gpu},
			nodes:   []*corev1.Node{withGPUs(registered("g-1", "4", "110"), "2"), withGPUs(registered("g-2", "4", "110"), "1")},
			bound:   []*corev1.Pod{boundTo(b.Pod("there", b.CPU("4")), "g-1"), boundTo(b.Pod("there-too", b.CPU("4")), "g-2")},
			pending: []*corev1.Pod{b.Pod("train", b.CPU("1"), b.Request("nvidia.com/gpu", "2"))},
			want:    []string{"new zone-a/on-demand/m-4: train"},
		},
		{
			name:    "a node that is not Ready says nothing of the type",
			groups:  []*v1alpha1.NodeGroup{ng},
			nodes:   []*corev1.Node{notReady(registered("g-1", "1", "110"))},
			pending: []*corev1.Pod{b.Pod("big", b.CPU("3900m"))},
			want:    []string{"new zone-a/on-demand/m-4: big"},
		},
		{
			name:    "the group's nodes hold 29 pods",
			groups:  []*v1alpha1.NodeGroup{ng},
			nodes:   []*corev1.Node{registered("g-1", "4", "29")},
			bound:   small(29, "there", "g-1"),
			pending: small(40, "w", ""),
			want: []string{
				"new zone-a/on-demand/m-4: w-00,w-01,w-02,w-03,w-04,w-05,w-06,w-07,w-08,w-09,w-10,w-11,w-12,w-13,w-14,w-15,w-16,w-17,w-18,w-19,w-20,w-21,w-22,w-23,w-24,w-25,w-26,w-27,w-28",
				"new zone-a/on-demand/m-4: w-29,w-30,w-31,w-32,w-33,w-34,w-35,w-36,w-37,w-38,w-39",
			},
		},
	})
}

// TestMinSizeNodesDoNotTurnOnAnotherGroupsPods: a group below minSize 2
// offers one type on-demand and, cheaper, on spot, in two zones; its two
// nodes are spot, one per zone, whatever another group's pending pod
// spreads over: a spread over capacity types (or instance types) splits
// the templates by that key, and the minSize nodes still take the
// cheapest of each zone (not both in zone-a, one on-demand at three times
// the price, or a type four times the price), as Cluster Autoscaler
// raises the target size (ScaleUpToNodeGroupMinSize) whatever else waits.
func TestMinSizeNodesDoNotTurnOnAnotherGroupsPods(t *testing.T) {
	spotted := b.NodeGroup("g", b.Size(2, 10), b.InstanceType("m-2", "2", "8Gi",
		b.OnDemand("zone-a", "0.10"), b.Spot("zone-a", "0.03"), b.OnDemand("zone-b", "0.10"), b.Spot("zone-b", "0.03")))
	typed := b.NodeGroup("g", b.Size(2, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.40")))
	other := b.NodeGroup("other", b.InstanceType("o-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.TemplateTaint("dedicated", "other", corev1.TaintEffectNoSchedule))
	elsewhere := func(key string) *corev1.Pod {
		return b.Pod("x", b.CPU("1"), b.Labels("app", "x"), b.NodeSelector(v1alpha1.LabelNodeGroup, "other"),
			b.Tolerate("dedicated", "other", corev1.TaintEffectNoSchedule), b.Spread(key, 1, "app", "x"))
	}
	runPlanCases(t, []planCase{
		{
			name:   "spot and on-demand, nothing pending (control)",
			groups: []*v1alpha1.NodeGroup{spotted, other},
			want:   []string{"new zone-a/spot/m-2: ", "new zone-b/spot/m-2: "},
		},
		{
			name:    "spot and on-demand, another group's pod spreads over capacity types",
			groups:  []*v1alpha1.NodeGroup{spotted, other},
			pending: []*corev1.Pod{elsewhere(v1alpha1.LabelCapacityType)},
			want:    []string{"new zone-a/on-demand/o-2: x", "new zone-a/spot/m-2: ", "new zone-b/spot/m-2: "},
		},
		{
			name:   "two types, nothing pending (control)",
			groups: []*v1alpha1.NodeGroup{typed, other},
			want:   []string{"new zone-a/on-demand/m-2: ", "new zone-a/on-demand/m-2: "},
		},
		{
			name:    "two types, another group's pod spreads over instance types",
			groups:  []*v1alpha1.NodeGroup{typed, other},
			pending: []*corev1.Pod{elsewhere(v1alpha1.LabelInstanceType)},
			want:    []string{"new zone-a/on-demand/m-2: ", "new zone-a/on-demand/m-2: ", "new zone-a/on-demand/o-2: x"},
		},
	})
}

// TestAPodSaysWhichGroupsAreBackedOff: the only offering of group g
// failed to launch and is avoided for a while (Input.Unavailable, the
// controller's --unavailable-offering-ttl). The pod's NotTriggerScaleUp
// event, the plan's message, names g and counts it ("0/1", not "0/0" as
// if no group existed), with a second group that does not fit too, as
// Cluster Autoscaler tells the pod each group it skipped and why ("in
// backoff after failed scale-up", skippedreasons.go).
func TestAPodSaysWhichGroupsAreBackedOff(t *testing.T) {
	g := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	h := b.NodeGroup("h", b.Size(0, 10), b.InstanceType("h-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.TemplateTaint("dedicated", "h", corev1.TaintEffectNoSchedule))
	backedOff := []scaleup.Offering{{NodeGroup: "g", InstanceType: "m-4", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeOnDemand)}}
	for _, groups := range [][]*v1alpha1.NodeGroup{{g}, {g, h}} {
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: groups, Unavailable: backedOff, Pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Unschedulable) != 1 {
			t.Fatalf("%d groups: plan %+v, want web unschedulable", len(groups), plan)
		}
		msg := plan.Unschedulable[0].Message
		if !strings.Contains(msg, "g: ") || !strings.Contains(msg, fmt.Sprintf("/%d node groups", len(groups))) {
			t.Errorf("%d groups: message %q does not say that group g's offerings are all unavailable", len(groups), msg)
		}
	}
}

// TestANewNodeCountsInTheLimitsAsItsTypesCapacity: spec.limits caps the
// total capacity of the group's nodes. The group's Ready node has 16Gi
// capacity, 14Gi allocatable (kube-reserved, eviction threshold): a new
// node is planned with 14Gi for its pods but counts against the limit as
// its type's 16Gi, as the node it launches will register (and as the
// existing one counts), so the limit is not overshot.
func TestANewNodeCountsInTheLimitsAsItsTypesCapacity(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 100), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.GroupLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Gi")}))
	n := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("14Gi")
	full := boundTo(b.Pod("there", b.Memory("14Gi")), "g-1")
	var pending []*corev1.Pod
	for i := range 10 {
		pending = append(pending, b.Pod(fmt.Sprintf("w-%d", i), b.CPU("100m"), b.Memory("13Gi")))
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n}, Pods: []*corev1.Pod{full}, Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	total := resource.MustParse("16Gi") // the existing node's capacity
	for range plan.NewNodes {
		total.Add(resource.MustParse("16Gi")) // m-4's capacity: what the launched node registers with
	}
	if total.Cmp(resource.MustParse("128Gi")) > 0 || len(plan.NewNodes) != 7 {
		t.Errorf("%d new m-4 nodes planned: the group's memory capacity would be %s; want 7 (its limit 128Gi, 16Gi each)", len(plan.NewNodes), total.String())
	}
}

// TestAClusterAPIGroupsNodesWithTheCloudsTypeLabelSayWhatANewNodeHas: a
// Cluster API group's one instance type is named in the NodeGroup (any
// name); its adopted nodes keep the cloud's instance type label
// (nodeadoption labels only where the node has none). They are still the
// group's type: the pod larger than their allocatable gets no node.
func TestAClusterAPIGroupsNodesWithTheCloudsTypeLabelSayWhatANewNodeHas(t *testing.T) {
	ng := b.NodeGroup("workers", b.Size(0, 10), b.InstanceType("workers-md-0", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Name: "workers-md-0", Namespace: "default"}}
	n := groupNode("w-1", ng, "workers-md-0", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	n.Labels[v1alpha1.LabelInstanceType] = "m5.xlarge" // the cloud's, kept by adoption
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3920m")
	runPlanCases(t, []planCase{{
		name:    "a pod larger than the group's node",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{n},
		pending: []*corev1.Pod{b.Pod("big", b.CPU("3950m"))},
		want:    []string{"unschedulable: big"},
	}})
}

// TestTheOptionCacheFollowsWhatTheGroupsNodesHave: the options kept from
// round to round are built again once the group's nodes say what a node
// of the type has: the pod planned from zero gets no second node.
func TestTheOptionCacheFollowsWhatTheGroupsNodesHave(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	ng.UID, ng.Generation = "uid-g", 1
	opts := scaleup.NewOptions()
	pending := []*corev1.Pod{b.Pod("big", b.CPU("3950m"))}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending, Options: opts})
	if err != nil || len(plan.NewNodes) != 1 {
		t.Fatalf("from zero: %+v %v", plan, err)
	}
	n := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3920m")
	plan, err = scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n}, Pending: pending, Options: opts})
	if err != nil || len(plan.NewNodes) != 0 {
		t.Fatalf("with a node up: %+v %v", plan, err)
	}
}

// TestAResourceOnlyTheGroupsNodesHaveCountsInTheLimits: the type does not
// say it has a GPU; the group's node has one (a device plugin's) and the
// group is limited to 2 GPUs. A new node is planned with the GPU its
// group's nodes have, and counts it in the limit: of 4 pods of one GPU,
// one gets a new node, not four.
func TestAResourceOnlyTheGroupsNodesHaveCountsInTheLimits(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 100), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.GroupLimits(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}))
	n := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	b.NodeAllocatable("nvidia.com/gpu", "1")(n)
	n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("1")
	full := boundTo(b.Pod("there", b.CPU("100m"), b.Request("nvidia.com/gpu", "1")), "g-1")
	var pending []*corev1.Pod
	for i := range 4 {
		pending = append(pending, b.Pod(fmt.Sprintf("train-%d", i), b.CPU("100m"), b.Request("nvidia.com/gpu", "1")))
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n}, Pods: []*corev1.Pod{full}, Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 1 {
		t.Errorf("%d new nodes of one GPU planned beside the one the group has, want 1 (its limit is 2 GPUs)", len(plan.NewNodes))
	}
}

// TestANodeOfAnOlderTypeSaysNothingOfTheGroupsType: the group's one type
// was changed from m-2 to m-4 (its pods outgrew m-2); its m-2 node says
// nothing of what an m-4 has: the 3-cpu pod gets an m-4.
func TestANodeOfAnOlderTypeSaysNothingOfTheGroupsType(t *testing.T) {
	before := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	n := groupNode("g-1", before, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	runPlanCases(t, []planCase{{
		name:    "a pod larger than the old type",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{n},
		pending: []*corev1.Pod{b.Pod("big", b.CPU("3"))},
		want:    []string{"new zone-a/on-demand/m-4: big"},
	}})
}

// TestALaunchedInstanceHasWhatItsTypesNodesHave: a launched instance whose
// Node has not registered yet is shown to the planner as the controller
// builds it (synthetic), from its type's capacity. The group's Ready node
// of the type says what such a node has: 3 of its 4 cpu, 29 pods on the cloud's network; the round
// that launched the instance packed it so, and its Node will register so
// (Karpenter plans an in-flight NodeClaim with the allocatable its launch
// assumed: "should launch a second node if a pod won't fit on the
// existingNodes node"). A pod of the next round that fits only in the
// capacity the instance will not have gets a node of its own.
func TestALaunchedInstanceHasWhatItsTypesNodesHave(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	ng.UID = "uid-g"
	up := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(up)
	up.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3")
	up.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("29")
	up.Status.Capacity[corev1.ResourcePods] = resource.MustParse("29")
	tiny := func(prefix string, n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, b.Pod(fmt.Sprintf("%s-%02d", prefix, i), b.CPU("10m")))
		}
		return out
	}
	var held29 []*corev1.Pod
	for _, p := range tiny("first", 29) {
		held29 = append(held29, podutil.HeldOn(p, "g-2"))
	}
	for _, tc := range []struct {
		name    string
		held    []*corev1.Pod
		pending []*corev1.Pod
		want    []string
	}{
		{name: "cpu: 3 of the instance's 3 cpu are planned", held: []*corev1.Pod{podutil.HeldOn(b.Pod("first", b.CPU("3")), "g-2")},
			pending: []*corev1.Pod{b.Pod("q", b.CPU("1"))}, want: []string{"new zone-a/on-demand/m-4: q"}},
		{name: "pods: 29 of the instance's 29 pod slots are planned", held: held29,
			pending: tiny("q", 3), want: []string{"new zone-a/on-demand/m-4: q-00,q-01,q-02"}},
		{name: "room left on the instance takes the pod (control)", held: []*corev1.Pod{podutil.HeldOn(b.Pod("first", b.CPU("2")), "g-2")},
			pending: []*corev1.Pod{b.Pod("q", b.CPU("1"))}, want: []string{"on g-2: q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{up, synthetic(ng, "m-4", "g-2", nil)},
				Pods: []*corev1.Pod{boundTo(b.Pod("full", b.CPU("3")), "g-1")}, Held: tc.held, Pending: tc.pending})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// synthetic is a launched instance as the controller builds it
// (provisioning.syntheticNode): the type's capacity (pods 110 when the
// type does not say), less its DaemonSets' room, never Ready.
func synthetic(ng *v1alpha1.NodeGroup, it, name string, dss []*appsv1.DaemonSet) *corev1.Node {
	n := groupNode(name, ng, it, "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	b.Booting()(n)
	t, _ := ng.FindOffering(it, "zone-a", v1alpha1.CapacityTypeOnDemand)
	capacity := t.Capacity.DeepCopy()
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse("110")
	}
	planned := &corev1.Node{ObjectMeta: n.ObjectMeta, Spec: corev1.NodeSpec{Taints: ng.NodeTaints()}}
	n.Status.Capacity, n.Status.Allocatable = capacity, daemonset.Remaining(capacity.DeepCopy(), daemonset.Pods(dss), planned)
	n.Annotations[daemonset.AnnotationRoomKept] = "true"
	return n
}

// TestALaunchedInstanceKeepsItsDaemonSetsRoomOfWhatItsTypeDoesNotSay:
// the type does not declare ephemeral-storage; its Ready node has 100Gi.
// The agent DaemonSet requests 20Gi. The round that launched g-2 packed a
// 70Gi pod on it (100 - 20 overhead = 80 free). The next round must not
// put a 20Gi pod on g-2: only 10Gi is left once the agent runs there.
func TestALaunchedInstanceKeepsItsDaemonSetsRoomOfWhatItsTypeDoesNotSay(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	ng.UID = "uid-g"
	up := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(up)
	b.NodeAllocatable(corev1.ResourceEphemeralStorage, "100Gi")(up)
	agent := b.DaemonSet("agent", b.CPU("100m"), b.Request(corev1.ResourceEphemeralStorage, "20Gi"))
	agentOnUp := boundTo(b.Pod("agent-g-1", b.CPU("100m"), b.Request(corev1.ResourceEphemeralStorage, "20Gi"), b.OwnedBy("DaemonSet", "agent")), "g-1")
	fullUp := boundTo(b.Pod("full", b.CPU("100m"), b.Request(corev1.ResourceEphemeralStorage, "75Gi")), "g-1")
	launching := synthetic(ng, "m-4", "g-2", []*appsv1.DaemonSet{agent})
	held := podutil.HeldOn(b.Pod("first", b.CPU("100m"), b.Request(corev1.ResourceEphemeralStorage, "70Gi")), "g-2")
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{up, launching},
		DaemonSets: []*appsv1.DaemonSet{agent}, Pods: []*corev1.Pod{agentOnUp, fullUp}, Held: []*corev1.Pod{held},
		Pending: []*corev1.Pod{b.Pod("q", b.CPU("100m"), b.Request(corev1.ResourceEphemeralStorage, "20Gi"))}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"new zone-a/on-demand/m-4: q"}, summary(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestALaunchedInstanceHasThePodSlotsItsTypesNodesHave: the type does
// not declare pods; its Ready node has 250 (kubelet
// max-pods). A new m-4 is planned with 250 slots, so the round that
// launched g-2 packed 150 pods on it; the next round sees g-2 with those
// 250 slots (not the 110 the controller writes when the type does not
// say) and puts one more pod there.
func TestALaunchedInstanceHasThePodSlotsItsTypesNodesHave(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	ng.UID = "uid-g"
	delete(ng.Spec.InstanceTypes[0].Capacity, corev1.ResourcePods) // the type does not say
	up := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(up)
	b.NodeAllocatable(corev1.ResourcePods, "250")(up)
	launching := synthetic(ng, "m-4", "g-2", nil)
	var held []*corev1.Pod
	for i := range 150 {
		held = append(held, podutil.HeldOn(b.Pod(fmt.Sprintf("first-%03d", i), b.CPU("10m")), "g-2"))
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{up, launching},
		Pods: []*corev1.Pod{boundTo(b.Pod("full", b.CPU("4")), "g-1")}, Held: held,
		Pending: []*corev1.Pod{b.Pod("q", b.CPU("10m"))}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"on g-2: q"}, summary(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	// Control: the round that launched g-2 packs 150 such pods on one new node.
	var pending []*corev1.Pod
	for i := range 150 {
		pending = append(pending, b.Pod(fmt.Sprintf("first-%03d", i), b.CPU("10m")))
	}
	plan, err = scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{up},
		Pods: []*corev1.Pod{boundTo(b.Pod("full", b.CPU("4")), "g-1")}, Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 1 {
		t.Errorf("control: %d new nodes for 150 tiny pods, want 1", len(plan.NewNodes))
	}
}

// TestAClusterAPINodeLaunchedWithAFormerTemplateStillSaysWhatItsTypeHas:
// a Cluster API group's node keeps the cloud's type label. A template
// label was added to the group since it launched (its launch hash is the
// former one: drifted, but its machine is the same type). What it makes
// allocatable still says what a new node has: the 3950m pod fits no node.
func TestAClusterAPINodeLaunchedWithAFormerTemplateStillSaysWhatItsTypeHas(t *testing.T) {
	mk := func(opts ...b.NodeGroupOption) *v1alpha1.NodeGroup {
		ng := b.NodeGroup("workers", append([]b.NodeGroupOption{b.Size(0, 10), b.InstanceType("workers-md-0", "4", "16Gi", b.OnDemand("zone-a", "0.20"))}, opts...)...)
		ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Name: "workers-md-0", Namespace: "default"}}
		return ng
	}
	before, ng := mk(), mk(b.TemplateLabel("tier", "gold"))
	n := groupNode("w-1", before, "workers-md-0", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(before)(n)
	n.Annotations[v1alpha1.AnnotationLaunchHash] = before.LaunchHash()
	n.Labels[v1alpha1.LabelInstanceType] = "m5.xlarge"
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3920m")
	runPlanCases(t, []planCase{{
		name:    "a pod larger than the group's node",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{n},
		pending: []*corev1.Pod{b.Pod("big", b.CPU("3950m"))},
		want:    []string{"unschedulable: big"},
	}})
}

// TestALaunchedInstanceCountsTheGPUItsTypesNodesHaveInTheLimits: the
// group is limited to 2 GPUs; its type does not declare the GPU its
// nodes have. g-1 (1 GPU) is up and full; g-2 was launched last round for
// a GPU pod (planned with 1 GPU, counted 1 in the limit) and has not
// registered. A second GPU pod must not get a third node: the group would
// have 3 GPUs.
func TestALaunchedInstanceCountsTheGPUItsTypesNodesHaveInTheLimits(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 100), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.GroupLimits(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}))
	ng.UID = "uid-g"
	n := groupNode("g-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	b.NodeAllocatable("nvidia.com/gpu", "1")(n)
	full := boundTo(b.Pod("there", b.CPU("100m"), b.Request("nvidia.com/gpu", "1")), "g-1")
	launching := synthetic(ng, "m-4", "g-2", nil)
	held := podutil.HeldOn(b.Pod("train-0", b.CPU("100m"), b.Request("nvidia.com/gpu", "1")), "g-2")
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n, launching},
		Pods: []*corev1.Pod{full}, Held: []*corev1.Pod{held},
		Pending: []*corev1.Pod{b.Pod("train-1", b.CPU("100m"), b.Request("nvidia.com/gpu", "1"))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 0 {
		t.Errorf("%v: a third 1-GPU node planned; the group's limit is 2 GPUs", summary(plan))
	}
}

// TestAPodGoesToAReadyNodeBeforeABootingOne (Karpenter's "should order
// initialized nodes for scheduling"): a-1 is booting in zone-a, b-1 is
// Ready in zone-b, both with 4 cpu free. kube-scheduler binds a pod to a
// Ready node now and waits for a booting one; the plan must do the same,
// or the booting node's room goes to a pod that does not need it: one
// pod either node takes was planned (and nominated) onto the booting
// node, first by name. (With a second pod that only the booting node
// takes, the plan's improving moves already put each where it belongs;
// that case guards them.)
func TestAPodGoesToAReadyNodeBeforeABootingOne(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi",
		b.OnDemand("zone-a", "0.20"), b.OnDemand("zone-b", "0.20")))
	booting := groupNode("a-1", ng, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(booting)
	b.Booting()(booting)
	ready := groupNode("b-1", ng, "m-4", "zone-b", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(ready)
	runPlanCases(t, []planCase{{
		name:   "a pod either node takes and one only the booting node takes",
		groups: []*v1alpha1.NodeGroup{ng},
		nodes:  []*corev1.Node{booting, ready},
		pending: []*corev1.Pod{b.Pod("web", b.CPU("3")),
			b.Pod("zoned", b.CPU("2"), b.NodeSelector(corev1.LabelTopologyZone, "zone-a"))},
		want: []string{"on a-1: zoned", "on b-1: web"},
	}, {
		name:    "one pod either node takes",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{booting, ready},
		pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))},
		want:    []string{"on b-1: web"},
	}})
}

// TestAPodIsNotPlannedOnATypeWhoseDaemonSetHoldsItsHostPort (Karpenter's
// "should not account for daemonset hostports when daemonset would not
// schedule on selected node"): an agent holding host port 8080 runs only
// on m-4 nodes. A pod of 3 cpu asking for 8080 fits m-4 in cpu, but the
// agent takes 8080 there once the node is up: m-8 is launched, where no
// agent holds it. A pod asking for another port still gets the cheaper
// m-4; with the agent on every type the pod waits.
func TestAPodIsNotPlannedOnATypeWhoseDaemonSetHoldsItsHostPort(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.40")))
	onM4 := b.DaemonSet("agent", b.CPU("100m"), b.HostPort(8080, corev1.ProtocolTCP), b.NodeSelector(v1alpha1.LabelInstanceType, "m-4"))
	everywhere := b.DaemonSet("agent", b.CPU("100m"), b.HostPort(8080, corev1.ProtocolTCP))
	for _, tc := range []struct {
		name  string
		agent *appsv1.DaemonSet
		pods  []*corev1.Pod
		want  []string
	}{
		{"the agent on m-4 only, the pod asks for its port", onM4,
			[]*corev1.Pod{b.Pod("web", b.CPU("3"), b.HostPort(8080, corev1.ProtocolTCP))}, []string{"new zone-a/on-demand/m-8: web"}},
		{"the agent on m-4 only, the pod asks for another port", onM4,
			[]*corev1.Pod{b.Pod("web", b.CPU("3"), b.HostPort(9090, corev1.ProtocolTCP))}, []string{"new zone-a/on-demand/m-4: web"}},
		{"the agent on m-4 only, the pod asks for the port over UDP", onM4,
			[]*corev1.Pod{b.Pod("web", b.CPU("3"), b.HostPort(8080, corev1.ProtocolUDP))}, []string{"new zone-a/on-demand/m-4: web"}},
		{"the agent on m-4 only, two pods of which one asks for its port: one m-8 is cheaper than an m-4 and an m-8", onM4,
			[]*corev1.Pod{b.Pod("web", b.CPU("3"), b.HostPort(8080, corev1.ProtocolTCP)), b.Pod("db", b.CPU("3"))},
			[]string{"new zone-a/on-demand/m-8: db,web"}},
		{"the agent everywhere", everywhere,
			[]*corev1.Pod{b.Pod("web", b.CPU("3"), b.HostPort(8080, corev1.ProtocolTCP))}, []string{"unschedulable: web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, DaemonSets: []*appsv1.DaemonSet{tc.agent}, Pending: tc.pods})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestANewNodeRunsThePodsItsGroupsNodesRunBesidesDaemonSets: the group's
// node runs, besides a workload, a pod every node of the group runs that
// no DaemonSet describes: a static pod's mirror (a kube-proxy the
// kubelet runs from a file) or a pod of a DaemonSet-like controller
// marked cluster-autoscaler.kubernetes.io/daemonset-pod: "true". As
// Cluster Autoscaler plans a new node with those pods on it
// (podsExpectedOnFreshNode), two pods of 1 cpu need two 2-cpu nodes;
// planned on one, the second waited for another round and node. A pod
// of the group's node that is neither (the workload) is no overhead.
func TestANewNodeRunsThePodsItsGroupsNodesRunBesidesDaemonSets(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	n := groupNode("n", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand)
	b.LaunchedBy(ng)(n)
	pending := []*corev1.Pod{b.Pod("web-1", b.CPU("1")), b.Pod("web-2", b.CPU("1"))}
	two := []string{"new zone-a/on-demand/m-2: web-1", "new zone-a/on-demand/m-2: web-2"}
	runPlanCases(t, []planCase{{
		name: "a static pod's mirror", groups: []*v1alpha1.NodeGroup{ng}, nodes: []*corev1.Node{n}, pending: pending, want: two,
		bound: []*corev1.Pod{boundTo(b.Pod("kube-proxy-n", b.CPU("250m"), b.Namespace("kube-system"), b.Annotation(corev1.MirrorPodAnnotationKey, "hash")), "n"),
			boundTo(b.Pod("app", b.CPU("1750m")), "n")},
	}, {
		name: "a pod marked as a DaemonSet's", groups: []*v1alpha1.NodeGroup{ng}, nodes: []*corev1.Node{n}, pending: pending, want: two,
		bound: []*corev1.Pod{boundTo(b.Pod("agent-n", b.CPU("250m"), b.Namespace("kube-system"), b.OwnedBy("NodeAgent", "agent"),
			b.Annotation(podutil.AnnotationDaemonSetPod, "true")), "n"), boundTo(b.Pod("app", b.CPU("1750m")), "n")},
	}, {
		name: "the node runs a workload only", groups: []*v1alpha1.NodeGroup{ng}, nodes: []*corev1.Node{n}, pending: pending,
		bound: []*corev1.Pod{boundTo(b.Pod("app", b.CPU("2")), "n")},
		want:  []string{"new zone-a/on-demand/m-2: web-1,web-2"},
	}})
}

// TestAPendingPodDoesNotTakeTheRoomOfAReplacement (Karpenter's "should
// schedule all pods on one inflight node when node is in deleting
// state"): berth launched new, a cheaper node, to replace old
// (berth.dev/replaced-by), and drains old once new is up; new was sized
// for old's pods. A pod that comes while new boots gets a node of its
// own: planned on new (empty to the planner), it left old's pods no room,
// and old's replacement was given up at its drain with new bought. Nor
// does a pod go to old, which is drained next. Scale-down's re-check of
// old still finds its pods a home on new (the room is scale-up's view
// only).
func TestAPendingPodDoesNotTakeTheRoomOfAReplacement(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.10")))
	ng.UID = "uid-g"
	old := b.Node("old", "8", "32Gi", b.LaunchedBy(ng), b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "new"))
	labels := b.NodeLabels(v1alpha1.LabelInstanceType, "m-4", v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	booting := b.Node("new", "4", "16Gi", b.LaunchedBy(ng), b.Booting(), labels)
	bound := []*corev1.Pod{
		boundTo(b.Pod("web-1", b.CPU("2"), b.OwnedBy("ReplicaSet", "web")), "old"),
		boundTo(b.Pod("web-2", b.CPU("1500m"), b.OwnedBy("ReplicaSet", "web")), "old"),
	}
	runPlanCases(t, []planCase{{
		name:    "a pod that comes while the replacement boots",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{old, booting},
		bound:   bound,
		pending: []*corev1.Pod{b.Pod("late", b.CPU("2"), b.OwnedBy("ReplicaSet", "late"))},
		want:    []string{"new zone-a/on-demand/m-4: late"},
	}, {
		name:    "a small pod fits beside the old node's pods on the replacement",
		groups:  []*v1alpha1.NodeGroup{ng},
		nodes:   []*corev1.Node{old, booting},
		bound:   bound,
		pending: []*corev1.Pod{b.Pod("small", b.CPU("250m"), b.OwnedBy("ReplicaSet", "small"))},
		want:    []string{"on new: small"},
	}})
	up := b.Node("new", "4", "16Gi", b.LaunchedBy(ng), labels)
	if bl, err := scaledown.Recheck(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{old, up}, Pods: bound}, "old"); err != nil || bl != nil {
		t.Errorf("old's re-check once new is up: %+v %v; want its pods to fit on new", bl, err)
	}
}
