package scaleup_test

// Cases found by porting Karpenter's provisioning and topology suites
// (v1.15.0) to berth plan, where berth disagreed with kube-scheduler or
// with the node it would really get.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTaintsThatGoAwayOnTheirOwn: a node of berth's takes a pending pod
// while its startup taint, the cloud controller manager's uninitialized
// taint, the node lifecycle's not-ready taint and the startup taints by
// convention (Cluster Autoscaler's prefixes, the Node Readiness
// Controller's, network-unavailable) are only those of a node coming up (it was launched within the launch grace, or, its age
// unknown, it is not Ready and initialized yet). Past that, a startup or
// uninitialized taint still there stays (the agent that removes it
// failed): the pod gets a new node, as kube-scheduler would never put it
// there.
func TestTaintsThatGoAwayOnTheirOwn(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: "agent.example.com/not-ready", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	startup := b.NodeTaint("agent.example.com/not-ready", "", corev1.TaintEffectNoSchedule)
	uninitialized := b.NodeTaint(scaleup.TaintCloudUninitialized, "true", corev1.TaintEffectNoSchedule)
	caStartup := b.NodeTaint("startup-taint.cluster-autoscaler.kubernetes.io/cni", "true", corev1.TaintEffectNoSchedule)
	caIgnore := b.NodeTaint("ignore-taint.cluster-autoscaler.kubernetes.io/gpu-driver", "true", corev1.TaintEffectNoSchedule)
	readinessRule := b.NodeTaint("readiness.k8s.io/network-ready", "pending", corev1.TaintEffectNoSchedule)
	networkUnavailable := b.NodeTaint(corev1.TaintNodeNetworkUnavailable, "", corev1.TaintEffectNoSchedule)
	capiUninitialized := b.NodeTaint("node.cluster.x-k8s.io/uninitialized", "", corev1.TaintEffectNoSchedule)
	notReady := func(n *corev1.Node) {
		b.NotReady()(n)
		b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)(n)
	}
	age := func(d time.Duration) b.NodeOption {
		return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(now.Add(-d)) }
	}
	onIt := []string{"on n: web"}
	newNode := []string{"new zone-a/on-demand/m-2: web"}
	tests := []struct {
		name string
		node []b.NodeOption
		want []string
	}{
		{"a node launched a minute ago, not Ready yet, with every taint of a node coming up", []b.NodeOption{age(time.Minute), b.Booting(), notReady, startup, uninitialized}, onIt},
		{"a node Ready a moment ago whose agent has not removed its startup taint yet", []b.NodeOption{age(2 * time.Minute), startup}, onIt},
		{"a node whose startup taint is still there an hour after its launch", []b.NodeOption{age(time.Hour), startup}, newNode},
		{"a node the cloud controller manager has not initialized an hour after its launch", []b.NodeOption{age(time.Hour), uninitialized}, newNode},
		{"a hand-written node, Ready and initialized, with its startup taint", []b.NodeOption{startup}, newNode},
		{"a hand-written node not Ready yet with its startup taint", []b.NodeOption{b.Booting(), notReady, startup}, onIt},
		// Up once (initialized) and not Ready now: down, not booting.
		{"a node launched five minutes ago that came up and went down", []b.NodeOption{age(5 * time.Minute), notReady}, newNode},
		{"a hand-written node that came up and went down", []b.NodeOption{notReady}, newNode},
		// Startup taints by convention, whatever the group lists: Cluster
		// Autoscaler's (IsStartupTaint), the Node Readiness Controller's
		// (Karpenter's KnownEphemeralTaintKeyPrefixes) and the route
		// controller's network-unavailable taint.
		{"a node Ready a moment ago with a Cluster Autoscaler startup taint", []b.NodeOption{age(2 * time.Minute), caStartup}, onIt},
		{"a node Ready a moment ago with a Cluster Autoscaler ignore taint", []b.NodeOption{age(2 * time.Minute), caIgnore}, onIt},
		{"a node not Ready yet with a Cluster Autoscaler startup taint", []b.NodeOption{age(time.Minute), b.Booting(), notReady, caStartup}, onIt},
		{"a node Ready a moment ago whose routes are not made yet", []b.NodeOption{age(2 * time.Minute), networkUnavailable}, onIt},
		{"a node not Ready yet with a readiness rule's taint", []b.NodeOption{age(time.Minute), b.Booting(), notReady, readinessRule}, onIt},
		{"a node Ready a moment ago with a readiness rule's taint", []b.NodeOption{age(2 * time.Minute), readinessRule}, onIt},
		{"a node whose readiness rule's taint is still there an hour after its launch", []b.NodeOption{age(time.Hour), readinessRule}, newNode},
		// Cluster API's kubeadm bootstrap taints a joining node until its
		// Machine controller has synced the node's labels.
		{"a node Ready a moment ago that Cluster API has not initialized yet", []b.NodeOption{age(2 * time.Minute), capiUninitialized}, onIt},
		{"a node Cluster API has not initialized an hour after its launch", []b.NodeOption{age(time.Hour), capiUninitialized}, newNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := groupNode("n", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand)
			b.LaunchedBy(ng)(n)
			for _, o := range tt.node {
				o(n)
			}
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n},
				Pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))}, Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestANodeBeingDeletedTakesNoPod: a node someone deletes (a finalizer
// holds it) has room, but a pod bound there would go with it: the pod
// gets a new node, as Karpenter has it.
func TestANodeBeingDeletedTakesNoPod(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	n := b.Node("going", "4", "16Gi", func(n *corev1.Node) {
		n.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		n.Finalizers = []string{"example.com/hold"}
	})
	runPlanCases(t, []planCase{{name: "deleting", groups: []*v1alpha1.NodeGroup{ng}, nodes: []*corev1.Node{n},
		pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))}, want: []string{"new zone-a/on-demand/m-2: web"}}})
}

// TestAPodMatchingItsOwnAffinityJoinsThePinnedPodsItSelects: app requires
// pod affinity (zone) to security=s2 and carries that label itself, so
// kube-scheduler lets it into any zone while no s2 pod exists; db, also
// s2, must run in the dearer zone-b. Planned first, app took the cheap
// zone-a, which kube-scheduler refuses it once db is bound: the plan held
// only if app happened to bind first. app joins db's zone, in either
// order of the pods.
func TestAPodMatchingItsOwnAffinityJoinsThePinnedPodsItSelects(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.40"), b.OnDemand("zone-b", "0.90")))
	db := b.Pod("db", b.CPU("2"), b.Labels("security", "s2"), b.NodeSelector(v1alpha1.LabelZone, "zone-b"))
	app := b.Pod("app", b.CPU("1"), b.Labels("security", "s2"), b.PodAffinity(b.AffinityTerm(v1alpha1.LabelZone, "security", "s2")))
	want := []string{"new zone-b/on-demand/m-2: app", "new zone-b/on-demand/m-2: db"}
	runPlanCases(t, []planCase{
		{name: "db listed first", groups: []*v1alpha1.NodeGroup{ng}, pending: []*corev1.Pod{db, app}, want: want},
		{name: "app listed first", groups: []*v1alpha1.NodeGroup{ng}, pending: []*corev1.Pod{app, db}, want: want},
	})
}

// TestANodeTypeIsOneItsDaemonSetsFit: a DaemonSet asks 3 cpu of every
// node; a pod asking only memory fits the 2-cpu type, but the agent never
// would: the 4-cpu type is chosen. When no type holds the DaemonSet, the
// pod still gets the cheapest (kube-scheduler binds it there).
func TestANodeTypeIsOneItsDaemonSetsFit(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("small", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("large", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	for _, tc := range []struct{ agent, want string }{{"3", "large"}, {"8", "small"}} {
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, DaemonSets: []*appsv1.DaemonSet{b.DaemonSet("agent", b.CPU(tc.agent))},
			Pending: []*corev1.Pod{b.Pod("web", b.Memory("100Mi"))}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"new zone-a/on-demand/" + tc.want + ": web"}, summary(plan)); diff != "" {
			t.Errorf("agent of %s cpu: plan (-want +got):\n%s", tc.agent, diff)
		}
	}
}

// TestAGroupOfWindowsNodesSaysSoByItsOSLabel (Karpenter's "pod os =
// windows" instance-selection case): a group whose template labels its
// nodes kubernetes.io/os=windows, as their kubelets will, takes the pods
// selecting windows, and a pod selecting linux never gets its cheaper
// nodes; a DaemonSet that selects linux nodes (kube-proxy) asks nothing of
// a Windows node. The planner labelled every node linux: the Windows pod
// waited, the linux pod got a node it can never run on.
func TestAGroupOfWindowsNodesSaysSoByItsOSLabel(t *testing.T) {
	win := b.NodeGroup("win", b.Size(0, 10), b.TemplateLabel(v1alpha1.LabelOS, "windows"),
		b.InstanceType("w-2", "2", "4Gi", b.OnDemand("zone-a", "0.05")), b.InstanceType("w-4", "4", "8Gi", b.OnDemand("zone-a", "0.09")))
	lin := b.NodeGroup("lin", b.Size(0, 10), b.InstanceType("l-4", "4", "8Gi", b.OnDemand("zone-a", "0.10")))
	proxy := b.DaemonSet("proxy", b.CPU("1500m"), b.NodeSelector(v1alpha1.LabelOS, "linux"))
	for _, tc := range []struct {
		os   string
		want []string
	}{
		{"windows", []string{"new zone-a/on-demand/w-2: p"}},
		{"linux", []string{"new zone-a/on-demand/l-4: p"}},
	} {
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{win, lin}, DaemonSets: []*appsv1.DaemonSet{proxy},
			Pending: []*corev1.Pod{b.Pod("p", b.CPU("1"), b.NodeSelector(v1alpha1.LabelOS, tc.os))}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
			t.Errorf("a pod selecting %s: plan (-want +got):\n%s", tc.os, diff)
		}
	}
}

// TestABootingNodeIsPlannedWithTheDevicesItsTypeHas: a GPU node launched
// a minute ago is Ready, but its device plugin has not advertised the GPU
// yet (or the kubelet zeroed it at start): a pod asking for a GPU waits
// for it there, as Karpenter has it, instead of buying a second GPU node.
// An hour after its launch the node is what it says.
func TestABootingNodeIsPlannedWithTheDevicesItsTypeHas(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("gpu", b.Size(0, 10), b.InstanceType("g-4", "4", "16Gi", b.OnDemand("zone-a", "1.10")), b.ExtraCapacity("example.com/gpu", "1"))
	for _, tc := range []struct {
		age  time.Duration
		want []string
	}{{time.Minute, []string{"on n: train"}}, {time.Hour, []string{"new zone-a/on-demand/g-4: train"}}} {
		n := groupNode("n", ng, "g-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
		b.LaunchedBy(ng)(n)
		n.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
		n.Status.Allocatable["example.com/gpu"] = resource.MustParse("0")
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n},
			Pending: []*corev1.Pod{b.Pod("train", b.CPU("1"), b.Request("example.com/gpu", "1"))}, Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
			t.Errorf("node launched %s ago: plan (-want +got):\n%s", tc.age, diff)
		}
	}
}

// TestAPodsLimitCountsThePodCapacityOfTheGroupsNodes: spec.limits.pods
// caps the pod slots of a group's nodes, as Karpenter's NodePool limits
// do: with room for 25 slots, two 10-pod nodes launch for 30 pods and the
// rest wait; with 5, none launches. A type that does not say how many
// pods it holds counts the kubelet's default (110).
func TestAPodsLimitCountsThePodCapacityOfTheGroupsNodes(t *testing.T) {
	pods := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, b.Pod(fmt.Sprintf("w-%02d", i), b.CPU("100m")))
		}
		return out
	}
	for _, tc := range []struct {
		limit   string
		podsCap string
		nodes   int
	}{{"25", "10", 2}, {"5", "10", 0}, {"100", "", 0}, {"110", "", 1}} {
		ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-16", "16", "64Gi", b.OnDemand("zone-a", "0.80")))
		if tc.podsCap != "" {
			b.ExtraCapacity(corev1.ResourcePods, tc.podsCap)(ng)
		}
		b.GroupLimits(corev1.ResourceList{corev1.ResourcePods: resource.MustParse(tc.limit)})(ng)
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods(30)})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.NewNodes) != tc.nodes {
			t.Errorf("limit of %s pods, %q pods a node: %d new nodes, want %d", tc.limit, tc.podsCap, len(plan.NewNodes), tc.nodes)
		}
	}
}

// TestANewNodeHasItsDaemonSetsHostPortsTaken: a DaemonSet's pod holds
// host port 8080 on every node; a pod asking for 8080/TCP fits no new
// node (kube-scheduler would leave it or the agent pending there), one
// asking for 8080/UDP does.
func TestANewNodeHasItsDaemonSetsHostPortsTaken(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	agent := b.DaemonSet("agent", b.CPU("100m"), b.HostPort(8080, corev1.ProtocolTCP))
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, DaemonSets: []*appsv1.DaemonSet{agent},
		Pending: []*corev1.Pod{b.Pod("tcp", b.CPU("1"), b.HostPort(8080, corev1.ProtocolTCP)), b.Pod("udp", b.CPU("100m"), b.HostPort(8080, corev1.ProtocolUDP))}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"new zone-a/on-demand/m-2: udp", "unschedulable: tcp"}, summary(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestABootingNodeKeepsRoomForItsDaemonSets: a node launched a minute
// ago has registered but is not Ready; its DaemonSet (1 cpu) has no pod
// there yet and will have one the moment it is. A pod of 1.5 cpu would
// not fit beside it on the 2-cpu node: it gets a node of its own. Once
// the agent's pod is bound there, the room is its, not kept twice. So
// too on a node Ready a moment ago (the round its Readiness starts comes
// before the DaemonSet controller binds the agent; Karpenter keeps the
// room on every existing node), not on one Ready for ten minutes.
func TestABootingNodeKeepsRoomForItsDaemonSets(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	agent := b.DaemonSet("agent", b.CPU("1"))
	for _, tc := range []struct {
		name       string
		bound      []*corev1.Pod
		pod        string
		want       []string
		readySince time.Duration // 0: not Ready
	}{
		{"the agent still to come", nil, "1500m", []string{"new zone-a/on-demand/m-4: web"}, 0},
		{"the agent still to come, a pod that fits beside it", nil, "900m", []string{"on n: web"}, 0},
		{"the agent's pod bound already", []*corev1.Pod{boundTo(b.Pod("agent-x", b.CPU("1"), b.Namespace(agent.Namespace), b.OwnedBy("DaemonSet", "agent")), "n")}, "900m", []string{"on n: web"}, 0},
		{"Ready a moment ago, the agent still to come", nil, "1500m", []string{"new zone-a/on-demand/m-4: web"}, 5 * time.Second},
		{"Ready for ten minutes", nil, "1500m", []string{"on n: web"}, 10 * time.Minute},
	} {
		n := groupNode("n", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand)
		b.LaunchedBy(ng)(n)
		if tc.readySince == 0 {
			delete(n.Labels, v1alpha1.LabelInitialized)
			b.NotReady()(n)
		} else {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-tc.readySince))}}
		}
		n.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n}, Pods: tc.bound,
			DaemonSets: []*appsv1.DaemonSet{agent}, Pending: []*corev1.Pod{b.Pod("web", b.CPU(tc.pod))}, Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
			t.Errorf("%s: plan (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestPodsAskingForExtendedResourcesShareANode: pods asking one GPU each
// share a 4-GPU node, as kube-scheduler admits them (Cluster Autoscaler's
// TestWillConsiderAllPoolsWhichFitTwoPodsRequiringGpus): three on a group
// of maxSize 1, sixteen on four nodes, hugepages alike. The trial packings
// took the GPUs they planned out of the instance type's cached free room,
// so that every later node held one pod; with the options kept from round
// to round (as the controller keeps them) it got worse each round.
func TestPodsAskingForExtendedResourcesShareANode(t *testing.T) {
	gpus := func(n int, name corev1.ResourceName, q string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, b.Pod(fmt.Sprintf("p-%02d", i), b.CPU("100m"), b.Request(name, q)))
		}
		return out
	}
	options, base := scaleup.NewOptions(), snapshot.NewBase()
	for _, tc := range []struct {
		name    string
		maxSize int32
		res     corev1.ResourceName
		ask     string
		pods    int
		nodes   int
	}{
		{"three pods of one GPU, a group of one node", 1, "nvidia.com/gpu", "1", 3, 1},
		{"sixteen pods of one GPU", 10, "nvidia.com/gpu", "1", 16, 4},
		{"three pods of 256Mi of hugepages", 10, "hugepages-2Mi", "256Mi", 3, 1},
	} {
		ng := b.NodeGroup("g", b.Size(0, tc.maxSize), b.InstanceType("g4", "8", "32Gi", b.OnDemand("zone-a", "1.00")),
			b.ExtraCapacity("nvidia.com/gpu", "4"), b.ExtraCapacity("hugepages-2Mi", "1Gi"))
		ng.UID = "uid-g"
		for round := range 3 {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: gpus(tc.pods, tc.res, tc.ask), Options: options, Base: base})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.NewNodes) != tc.nodes || len(plan.Unschedulable) != 0 {
				t.Errorf("%s, round %d: %d new nodes, %d pods unschedulable; want %d nodes holding every pod", tc.name, round, len(plan.NewNodes), len(plan.Unschedulable), tc.nodes)
			}
		}
	}
}

// TestAChainOfSelfMatchingPodsJoinsTheFarthestPinnedOne: app (grp=g)
// requires zone affinity to grp=g, and so matches itself; mid (grp=g,
// tier=c, pinned by a node selector every node matches) requires zone
// affinity to tier=c; db (tier=c) must run in zone-b. db pins mid, mid
// pins app: all three go to zone-b, whatever the cheaper zone-a offers.
func TestAChainOfSelfMatchingPodsJoinsTheFarthestPinnedOne(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.40"), b.OnDemand("zone-b", "0.90")))
	app := b.Pod("app", b.CPU("1500m"), b.Labels("grp", "g"), b.PodAffinity(b.AffinityTerm(v1alpha1.LabelZone, "grp", "g")))
	mid := b.Pod("mid", b.CPU("1500m"), b.Labels("grp", "g", "tier", "c"), b.NodeSelector(v1alpha1.LabelOS, "linux"),
		b.PodAffinity(b.AffinityTerm(v1alpha1.LabelZone, "tier", "c")))
	db := b.Pod("db", b.CPU("1500m"), b.Labels("tier", "c"), b.NodeSelector(v1alpha1.LabelZone, "zone-b"))
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: []*corev1.Pod{app, mid, db}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"new zone-b/on-demand/m-2: app", "new zone-b/on-demand/m-2: db", "new zone-b/on-demand/m-2: mid"}
	if diff := cmp.Diff(want, summary(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestABootingNodeKeepsTheHostPortsOfItsDaemonSets: a node launched a
// minute ago is not Ready, and the DaemonSet that holds host port 9100 on
// every node of its group has no pod there yet. A pod asking for 9100/TCP
// fits neither there nor on a new node of the group (kube-scheduler would
// leave it or the agent pending), but on a node of a group the DaemonSet
// does not run on; a pod asking for 9100/UDP takes the booting node.
// The same holds for a launched instance whose Node has not registered
// (its room kept by the caller).
func TestABootingNodeKeepsTheHostPortsOfItsDaemonSets(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	other := b.NodeGroup("other", b.Size(0, 10), b.InstanceType("o-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")))
	agent := b.DaemonSet("agent", b.CPU("100m"), b.HostPort(9100, corev1.ProtocolTCP))
	agent.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.LabelNodeGroup: "g"}
	for _, roomKept := range []bool{false, true} {
		n := groupNode("n", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand)
		b.LaunchedBy(ng)(n)
		delete(n.Labels, v1alpha1.LabelInitialized)
		b.NotReady()(n)
		n.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		if roomKept {
			n.Annotations[daemonset.AnnotationRoomKept] = "true"
		}
		for _, tc := range []struct {
			protocol corev1.Protocol
			want     []string
		}{
			{corev1.ProtocolTCP, []string{"new zone-a/on-demand/o-2: web"}},
			{corev1.ProtocolUDP, []string{"on n: web"}},
		} {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng, other}, Nodes: []*corev1.Node{n},
				DaemonSets: []*appsv1.DaemonSet{agent}, Pending: []*corev1.Pod{b.Pod("web", b.CPU("100m"), b.HostPort(9100, tc.protocol))},
				Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
				t.Errorf("room kept %v, 9100/%s: plan (-want +got):\n%s", roomKept, tc.protocol, diff)
			}
		}
	}
}

// TestNodesThePodsPreferStayWithinTheLimits (Cluster Autoscaler's
// TestScaleUpMaxCoresLimitHit, with a preference): two pods kept apart,
// each preferring the 8-cpu type, which costs as much as the 4-cpu one,
// under a limit of 12 cpu (the group's, then the cluster's): one node of
// each type, 12 cpu. Each node took the preferred type within the room the
// limit left before any was chosen: two 8-cpu nodes, 16 cpu.
func TestNodesThePodsPreferStayWithinTheLimits(t *testing.T) {
	twelve := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12")}
	prefersBig := func(p *corev1.Pod) {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 100, Preference: b.Term(b.Expr(v1alpha1.LabelInstanceType, corev1.NodeSelectorOpIn, "big"))}}}
	}
	for _, tc := range []struct {
		name    string
		group   []b.NodeGroupOption
		cluster corev1.ResourceList
	}{
		{"the group's limit", []b.NodeGroupOption{b.GroupLimits(twelve)}, nil},
		{"the cluster's limit", nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("1Ti")}},
	} {
		ng := b.NodeGroup("g", append([]b.NodeGroupOption{b.Size(0, 10), b.InstanceType("small", "4", "16Gi", b.OnDemand("zone-a", "1")),
			b.InstanceType("big", "8", "16Gi", b.OnDemand("zone-a", "1"))}, tc.group...)...)
		pods := replicas("web", 2, b.CPU("1"), b.Labels("app", "web"), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "app", "web")), prefersBig)
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods, Limits: scaleup.Limits{Resources: tc.cluster}})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, n := range plan.NewNodes {
			types = append(types, n.InstanceType)
		}
		slices.Sort(types)
		if diff := cmp.Diff([]string{"big", "small"}, types); diff != "" || len(plan.Unschedulable) > 0 {
			t.Errorf("%s: new nodes (-want +got):\n%s\nunschedulable %v", tc.name, diff, plan.Unschedulable)
		}
	}
}

// TestADaemonSetThatWaitsForTheNodeToBeUpIsCountedOnANewNode (Karpenter's
// DaemonSets with node affinity for karpenter.sh/initialized): an agent
// of 1 cpu that selects berth.dev/initialized=true runs on every node
// once berth has seen it Ready: a pod of 1500m gets the 4-cpu type, which
// holds both (it got the 2-cpu type, where the agent found no room once
// the node was up).
func TestADaemonSetThatWaitsForTheNodeToBeUpIsCountedOnANewNode(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	agent := b.DaemonSet("agent", b.CPU("1"), b.NodeSelector(v1alpha1.LabelInitialized, "true"))
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, DaemonSets: []*appsv1.DaemonSet{agent},
		Pending: []*corev1.Pod{b.Pod("web", b.CPU("1500m"))}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"new zone-a/on-demand/m-4: web"}, summary(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
