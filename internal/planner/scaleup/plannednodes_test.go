package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

const (
	capacityType = v1alpha1.LabelCapacityType
	hostname     = v1alpha1.LabelHostname
	zone         = v1alpha1.LabelZone
)

// arch sets the architecture of the instance type added last.
func arch(a string) b.NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) { ng.Spec.InstanceTypes[len(ng.Spec.InstanceTypes)-1].Architecture = a }
}

// Node groups whose options differ in the labels OptionKeys name.
var (
	// spotOrOnDemand offers m-4 as spot (0.06) and on-demand (0.19) in
	// zone-a.
	spotOrOnDemand = b.NodeGroup("mixed", b.InstanceType("m-4", "4", "16Gi", b.Spot("zone-a", "0.06"), b.OnDemand("zone-a", "0.19")))
	// spotOrOnDemandTwoZones offers both in zone-a and zone-b.
	spotOrOnDemandTwoZones = b.NodeGroup("mixed", b.InstanceType("m-4", "4", "16Gi",
		b.Spot("zone-a", "0.06"), b.OnDemand("zone-a", "0.19"), b.Spot("zone-b", "0.06"), b.OnDemand("zone-b", "0.19")))
	// amdOrArm offers an amd64 type (0.20) and a cheaper arm64 one (0.16).
	amdOrArm = b.NodeGroup("mixed", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.InstanceType("a-4", "4", "16Gi", b.OnDemand("zone-a", "0.16")), arch("arm64"))
	// twoTypes offers two amd64 types, c-4 the cheaper.
	twoTypes = b.NodeGroup("mixed", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")),
		b.InstanceType("c-4", "4", "8Gi", b.OnDemand("zone-a", "0.17")))
)

func web(opts ...b.PodOption) []b.PodOption {
	return append([]b.PodOption{b.CPU("1"), b.Labels("app", "web")}, opts...)
}

// TestPlannedNodesCarryTheLabelsTopologyKeysName: a planned node of a group
// whose options differ in capacity type, architecture or instance type
// carries the value it will be launched with whenever a topology term of
// the round names the key, so that spread, pod affinity and anti-affinity
// on those keys are planned as kube-scheduler will check them.
func TestPlannedNodesCarryTheLabelsTopologyKeysName(t *testing.T) {
	guard := boundTo(b.Pod("guard", b.CPU("1"), b.Labels("app", "guard"),
		b.PodAntiAffinity(b.AffinityTerm(capacityType, "app", "web"))), "spot-1")
	db := boundTo(b.Pod("db", b.CPU("4"), b.Labels("app", "db")), "arm-1")
	runPlanCases(t, []planCase{
		{name: "two replicas apart by capacity type get a spot and an on-demand node",
			groups:  []*v1alpha1.NodeGroup{spotOrOnDemand},
			pending: replicas("web", 2, web(b.PodAntiAffinity(b.AffinityTerm(capacityType, "app", "web")))...),
			want:    []string{"new zone-a/on-demand/m-4: web-2", "new zone-a/spot/m-4: web-1"}},
		{name: "a third replica apart by capacity type has no capacity type left",
			groups:  []*v1alpha1.NodeGroup{spotOrOnDemand},
			pending: replicas("web", 3, web(b.PodAntiAffinity(b.AffinityTerm(capacityType, "app", "web")))...),
			want:    []string{"new zone-a/on-demand/m-4: web-2", "new zone-a/spot/m-4: web-1", "unschedulable: web-3"}},
		{name: "two replicas apart by architecture get an arm64 and an amd64 node",
			groups:  []*v1alpha1.NodeGroup{amdOrArm},
			pending: replicas("web", 2, web(b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelArch, "app", "web")))...),
			want:    []string{"new zone-a/on-demand/a-4: web-1", "new zone-a/on-demand/m-4: web-2"}},
		{name: "two replicas apart by instance type get one node of each type",
			groups:  []*v1alpha1.NodeGroup{twoTypes},
			pending: replicas("web", 2, web(b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelInstanceType, "app", "web")))...),
			want:    []string{"new zone-a/on-demand/c-4: web-1", "new zone-a/on-demand/m-4: web-2"}},
		{name: "pods with affinity by architecture to a pod on a full arm64 node get an arm64 node",
			groups: []*v1alpha1.NodeGroup{amdOrArm}, nodes: []*corev1.Node{groupNode("arm-1", amdOrArm, "a-4", "zone-a", v1alpha1.CapacityTypeOnDemand)},
			bound:   []*corev1.Pod{db},
			pending: replicas("web", 2, web(b.PodAffinity(b.AffinityTerm(v1alpha1.LabelArch, "app", "db")))...),
			want:    []string{"new zone-a/on-demand/a-4: web-1,web-2"}},
		{name: "replicas with affinity to each other by architecture stay on one architecture",
			groups:  []*v1alpha1.NodeGroup{amdOrArm},
			pending: replicas("web", 3, b.CPU("2"), b.Labels("app", "web"), b.PodAffinity(b.AffinityTerm(v1alpha1.LabelArch, "app", "web"))),
			want:    []string{"new zone-a/on-demand/a-4: web-1,web-2", "new zone-a/on-demand/a-4: web-3"}},
		{name: "spot-only pods spread over capacity types all go on spot, the only domain they may use",
			groups:  []*v1alpha1.NodeGroup{spotOrOnDemand},
			pending: replicas("web", 3, web(b.NodeSelector(capacityType, "spot"), b.Spread(capacityType, 1, "app", "web"))...),
			want:    []string{"new zone-a/spot/m-4: web-1,web-2,web-3"}},
		{name: "pods spread over capacity types and zones are balanced on both",
			groups:  []*v1alpha1.NodeGroup{spotOrOnDemandTwoZones},
			pending: replicas("web", 4, web(b.Spread(capacityType, 1, "app", "web"), b.Spread(zone, 1, "app", "web"))...),
			want:    []string{"new zone-a/spot/m-4: web-1,web-3", "new zone-b/on-demand/m-4: web-2,web-4"}},
		{name: "a running pod's anti-affinity by capacity type keeps pending pods off spot",
			groups: []*v1alpha1.NodeGroup{spotOrOnDemand}, nodes: []*corev1.Node{groupNode("spot-1", spotOrOnDemand, "m-4", "zone-a", v1alpha1.CapacityTypeSpot)},
			bound:   []*corev1.Pod{guard},
			pending: replicas("web", 1, web()...),
			want:    []string{"new zone-a/on-demand/m-4: web-1"}},
	})
}

// TestChainsOfPodAffinityArePlannedWhole: pods that each require the one
// before on their node (a <- b <- c <- d) go on one node, from zero and
// next to a first pod that already runs.
func TestChainsOfPodAffinityArePlannedWhole(t *testing.T) {
	plain := b.NodeGroup("plain", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")))
	link := func(name, after, key string) *corev1.Pod {
		opts := []b.PodOption{b.CPU("500m"), b.Labels("app", name)}
		if after != "" {
			opts = append(opts, b.PodAffinity(b.AffinityTerm(key, "app", after)))
		}
		return b.Pod(name, opts...)
	}
	chain := func(key string) []*corev1.Pod {
		return []*corev1.Pod{link("a", "", key), link("b", "a", key), link("c", "b", key), link("d", "c", key)}
	}
	runPlanCases(t, []planCase{
		{name: "a chain on the hostname from zero goes on one new node",
			groups: []*v1alpha1.NodeGroup{plain}, pending: chain(hostname),
			want: []string{"new zone-a/on-demand/m-4: a,b,c,d"}},
		{name: "a chain on the hostname whose first pod runs goes on that pod's node",
			groups: []*v1alpha1.NodeGroup{plain}, nodes: []*corev1.Node{groupNode("n1", plain, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)},
			bound: []*corev1.Pod{boundTo(link("a", "", hostname), "n1")}, pending: chain(hostname)[1:],
			want: []string{"on n1: b,c,d"}},
		{name: "a chain on zones goes in one zone",
			groups: []*v1alpha1.NodeGroup{plain}, pending: chain(zone),
			want: []string{"new zone-a/on-demand/m-4: a,b,c,d"}},
		{name: "a link another pod requires by zone is planned with its chain",
			groups: []*v1alpha1.NodeGroup{plain}, pending: append(chain(hostname)[:2], link("x", "b", zone)),
			want: []string{"new zone-a/on-demand/m-4: a,b,x"}},
		{name: "two pods that require each other stay pending, as kube-scheduler leaves them",
			groups: []*v1alpha1.NodeGroup{plain}, pending: []*corev1.Pod{link("a", "b", hostname), link("b", "a", hostname)},
			want: []string{"unschedulable: a,b"}},
	})
}

// TestHostnameSpreadFromZeroSpreads: replicas spread over hostnames get
// nodes of their own while their group can launch more (a fresh node is a
// domain with no pods), and share the nodes as kube-scheduler allows once
// it cannot.
func TestHostnameSpreadFromZeroSpreads(t *testing.T) {
	dedicated := func(maxSize int32) *v1alpha1.NodeGroup {
		return b.NodeGroup("dedicated", b.Size(0, maxSize), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")))
	}
	spread := func(maxSkew int32) []b.PodOption {
		return []b.PodOption{b.CPU("500m"), b.Labels("app", "web"), b.Spread(hostname, maxSkew, "app", "web")}
	}
	runPlanCases(t, []planCase{
		{name: "maxSkew 1: one replica per node",
			groups: []*v1alpha1.NodeGroup{dedicated(10)}, pending: replicas("web", 3, spread(1)...),
			want: []string{"new zone-a/on-demand/m-4: web-1", "new zone-a/on-demand/m-4: web-2", "new zone-a/on-demand/m-4: web-3"}},
		{name: "maxSkew 2: two replicas per node",
			groups: []*v1alpha1.NodeGroup{dedicated(10)}, pending: replicas("web", 4, spread(2)...),
			want: []string{"new zone-a/on-demand/m-4: web-1,web-2", "new zone-a/on-demand/m-4: web-3,web-4"}},
		{name: "a group that can launch only two nodes holds two replicas each",
			groups: []*v1alpha1.NodeGroup{dedicated(2)}, pending: replicas("web", 4, spread(1)...),
			want: []string{"new zone-a/on-demand/m-4: web-1,web-3", "new zone-a/on-demand/m-4: web-2,web-4"}},
	})
}

// TestZonesOnlyAGroupThePodCannotUseAreNoSpreadDomains: web spreads over
// zones (maxSkew 1) with one replica in zone-a and one in zone-b; the
// general group launches into both, a tainted gpu group into zone-c too,
// and no node exists there. kube-scheduler counts the zones of existing
// nodes: a new general node in zone-a takes the third replica at skew 1.
// A zone only a group the pod cannot use (its taint, or a node selector
// the group's nodes fail) offers is no domain the pod waits on.
func TestZonesOnlyAGroupThePodCannotUseAreNoSpreadDomains(t *testing.T) {
	general := b.NodeGroup("general", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.11")))
	gpu := b.NodeGroup("gpu", b.TemplateTaint("gpu", "true", corev1.TaintEffectNoSchedule),
		b.InstanceType("g-8", "8", "32Gi", b.OnDemand("zone-a", "1"), b.OnDemand("zone-b", "1"), b.OnDemand("zone-c", "1")))
	labelled := b.NodeGroup("labelled", b.TemplateLabel("pool", "other"),
		b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "1"), b.OnDemand("zone-b", "1"), b.OnDemand("zone-c", "1")))
	nodes := []*corev1.Node{groupNode("a1", general, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand), groupNode("b1", general, "m-2", "zone-b", v1alpha1.CapacityTypeOnDemand)}
	web := func(name string, opts ...b.PodOption) *corev1.Pod {
		return b.Pod(name, append([]b.PodOption{b.CPU("1500m"), b.Labels("app", "web"), b.Spread(zone, 1, "app", "web")}, opts...)...)
	}
	bound := []*corev1.Pod{boundTo(web("web-1"), "a1"), boundTo(web("web-2"), "b1")}
	runPlanCases(t, []planCase{
		{name: "a tainted group's zone",
			groups: []*v1alpha1.NodeGroup{general, gpu}, nodes: nodes, bound: bound, pending: []*corev1.Pod{web("web-3")},
			want: []string{"new zone-a/on-demand/m-2: web-3"}},
		{name: "the zone of a group whose nodes the pod's node affinity excludes",
			groups: []*v1alpha1.NodeGroup{general, labelled}, nodes: nodes, bound: bound,
			pending: []*corev1.Pod{web("web-3", b.RequireNodeAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "pool", Operator: corev1.NodeSelectorOpDoesNotExist}}}))},
			want: []string{"new zone-a/on-demand/m-2: web-3"}},
		{name: "a replica the tainted group's node takes in zone-c makes zone-c a domain kube-scheduler counts for the others too",
			groups: []*v1alpha1.NodeGroup{general, gpu}, nodes: nodes, bound: bound,
			pending: []*corev1.Pod{web("web-3", b.CPU("6"), b.Tolerate("gpu", "true", corev1.TaintEffectNoSchedule)), web("web-4")},
			want:    []string{"new zone-a/on-demand/m-2: web-4", "new zone-c/on-demand/g-8: web-3"}},
		{name: "the same in the other order",
			groups: []*v1alpha1.NodeGroup{general, gpu}, nodes: nodes, bound: bound,
			pending: []*corev1.Pod{web("web-4"), web("web-3", b.CPU("6"), b.Tolerate("gpu", "true", corev1.TaintEffectNoSchedule))},
			want:    []string{"new zone-a/on-demand/m-2: web-4", "new zone-c/on-demand/g-8: web-3"}},
		{name: "a tainted group's zone the pod tolerates is a domain: the third replica goes there",
			groups: []*v1alpha1.NodeGroup{general, gpu}, nodes: nodes, bound: bound,
			pending: []*corev1.Pod{web("web-3", b.Tolerate("gpu", "true", corev1.TaintEffectNoSchedule))},
			want:    []string{"new zone-c/on-demand/g-8: web-3"}},
	})
}

// TestPodsSelectingTheBetaLabelsGetNodes: the kubelet still sets
// beta.kubernetes.io/os and /arch, and cloud node controllers
// failure-domain.beta.kubernetes.io/zone and beta.kubernetes.io/instance-type,
// beside the GA labels; pods written against them get nodes, and a spread
// over the beta zone label spreads over zones.
func TestPodsSelectingTheBetaLabelsGetNodes(t *testing.T) {
	general := b.NodeGroup("general", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.11")))
	spread := []b.PodOption{b.CPU("1500m"), b.Labels("app", "web"), b.Spread(v1alpha1.LabelZoneBeta, 1, "app", "web")}
	// The cheaper a-4 is arm64: a pod that selects amd64 or m-4 must not get it.
	arm := b.InstanceType("a-4", "4", "16Gi", b.OnDemand("zone-a", "0.10"))
	mixed := b.NodeGroup("mixed", arm, b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")))
	mixed.Spec.InstanceTypes[0].Architecture = "arm64"
	runPlanCases(t, []planCase{
		{name: "a node selector on the beta os and arch labels",
			groups:  []*v1alpha1.NodeGroup{general},
			pending: []*corev1.Pod{b.Pod("old", b.CPU("1"), b.NodeSelector(v1alpha1.LabelOSBeta, "linux", v1alpha1.LabelArchBeta, "amd64"))},
			want:    []string{"new zone-a/on-demand/m-2: old"}},
		{name: "a node selector on the beta zone and instance type labels",
			groups:  []*v1alpha1.NodeGroup{general},
			pending: []*corev1.Pod{b.Pod("old", b.CPU("1"), b.NodeSelector(v1alpha1.LabelZoneBeta, "zone-b", v1alpha1.LabelInstanceTypeBeta, "m-2"))},
			want:    []string{"new zone-b/on-demand/m-2: old"}},
		{name: "a spread over the beta zone label",
			groups:  []*v1alpha1.NodeGroup{general},
			pending: replicas("web", 2, spread...),
			want:    []string{"new zone-a/on-demand/m-2: web-1", "new zone-b/on-demand/m-2: web-2"}},
		{name: "the beta arch label picks the option of that arch in a group of two",
			groups:  []*v1alpha1.NodeGroup{mixed},
			pending: []*corev1.Pod{b.Pod("old", b.CPU("1"), b.NodeSelector(v1alpha1.LabelArchBeta, "amd64"))},
			want:    []string{"new zone-a/on-demand/m-4: old"}},
		{name: "the beta instance-type label picks that type in a group of two",
			groups:  []*v1alpha1.NodeGroup{mixed},
			pending: []*corev1.Pod{b.Pod("old", b.CPU("1"), b.NodeSelector(v1alpha1.LabelInstanceTypeBeta, "m-4"))},
			want:    []string{"new zone-a/on-demand/m-4: old"}},
	})
}

// TestAPodBeingResizedCountsWhatItRunsWith: a bound pod resized in place
// from 3 cpu to 1 still runs with 3 until the kubelet actuates it;
// kube-scheduler counts 3 on its node of 4, so a pending pod of 2 cpu
// needs a new node.
func TestAPodBeingResizedCountsWhatItRunsWith(t *testing.T) {
	general := b.NodeGroup("general", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.19")))
	resized := boundTo(b.Pod("resized", b.CPU("1")), "n1")
	three := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	resized.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resized.Spec.Containers[0].Name,
		Resources: &corev1.ResourceRequirements{Requests: three}, AllocatedResources: three}}
	resized.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
	runPlanCases(t, []planCase{
		{name: "resize in progress", groups: []*v1alpha1.NodeGroup{general},
			nodes: []*corev1.Node{groupNode("n1", general, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)},
			bound: []*corev1.Pod{resized}, pending: []*corev1.Pod{b.Pod("p", b.CPU("2"))},
			want: []string{"new zone-a/on-demand/m-4: p"}},
	})
}

// TestLimitsPastWhatInt64HoldsLimitNothing: a node group limit and a
// cluster limit of 1e16 cpu (more millicores than an int64 holds, written
// to mean "no limit") let a pod get its node; they wrapped to negative
// numbers that refused every node.
func TestLimitsPastWhatInt64HoldsLimitNothing(t *testing.T) {
	huge := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e16"), corev1.ResourceMemory: resource.MustParse("1e20")}
	general := b.NodeGroup("general", b.GroupLimits(huge), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{general}, Pending: []*corev1.Pod{b.Pod("p", b.CPU("1"))}, Limits: scaleup.Limits{Resources: huge}})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(plan); len(got) != 1 || got[0] != "new zone-a/on-demand/m-2: p" {
		t.Errorf("plan %v, want one m-2 for p", got)
	}
}
