package scaleup_test

// A port of Karpenter's instance-selection suite
// (pkg/controllers/provisioning/scheduling/instance_selection_test.go) to
// berth's planner. Karpenter's NodePool is a berth NodeGroup; a NodePool
// requirement on a per-offering label (zone, capacity type, arch,
// instance type) is the NodeGroup's catalogue filtered to the offerings
// that satisfy it; karpenter.sh/capacity-type is berth.dev/capacity-type.
// Karpenter's fake instance types hold 5 pods and keep 100m cpu and 10Mi
// of their capacity (kube-reserved): berth's capacity is the allocatable,
// so a type here has that much less than its name says. An OS is a node
// group's (a template label), as berth has no OS per instance type.
// Karpenter-only features (minValues, the truncation of the instance
// types sent to the cloud provider) are not ported; the minValues cases
// are ported as what they say the choice is without minValues.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// ---------------------------------------------------------------------------
// Karpenter's fake catalogue.

// iselKPrice is fake.PriceFromResources: 0.1 a cpu and 0.1 a GB (1e9 bytes).
func iselKPrice(cpu, mem string) float64 {
	c, m := resource.MustParse(cpu), resource.MustParse(mem)
	return 0.1*c.AsApproximateFloat64() + 0.1*m.AsApproximateFloat64()/1e9
}

func iselPriceStr(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// iselKType is a fake.NewInstanceType: capacity less kube-reserved (100m,
// 10Mi), 5 pods.
func iselKType(name, cpu, mem, arch string, offs ...v1alpha1.Offering) v1alpha1.InstanceType {
	c, m := resource.MustParse(cpu), resource.MustParse(mem)
	c.Sub(resource.MustParse("100m"))
	m.Sub(resource.MustParse("10Mi"))
	return v1alpha1.InstanceType{Name: name, Architecture: arch, Offerings: offs, Capacity: corev1.ResourceList{
		corev1.ResourceCPU: c, corev1.ResourceMemory: m, corev1.ResourcePods: resource.MustParse("5")}}
}

func iselKGroup(name string, types []v1alpha1.InstanceType, opts ...b.NodeGroupOption) *v1alpha1.NodeGroup {
	ng := b.NodeGroup(name, append([]b.NodeGroupOption{b.Size(0, 1000)}, opts...)...)
	ng.Spec.InstanceTypes = types
	return ng
}

// iselAssortedType is one of fake.InstanceTypesAssorted.
type iselAssortedType struct {
	cpu, mem        int
	zone, ct        string
	os, arch        string
	name            string
	price           float64
	instanceTypeVal v1alpha1.InstanceType
}

func iselAssortedCatalogue() []iselAssortedType {
	var out []iselAssortedType
	for _, cpu := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, mem := range []int{1, 2, 4, 8, 16, 32, 64, 128} {
			for _, zone := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
				for _, ct := range []string{"spot", "on-demand"} {
					for _, os := range []string{"linux", "windows"} {
						for _, arch := range []string{"amd64", "arm64"} {
							c, m := fmt.Sprint(cpu), fmt.Sprintf("%dGi", mem)
							p := iselKPrice(c, m)
							name := fmt.Sprintf("%d-cpu-%d-mem-%s-%s-%s-%s", cpu, mem, arch, os, zone, ct)
							off := v1alpha1.Offering{Zone: zone, CapacityType: v1alpha1.CapacityType(ct), PricePerHour: iselPriceStr(p)}
							out = append(out, iselAssortedType{cpu: cpu, mem: mem, zone: zone, ct: ct, os: os, arch: arch, name: name, price: p,
								instanceTypeVal: iselKType(name, c, m, arch, off)})
						}
					}
				}
			}
		}
	}
	return out
}

// iselAssortedGroups is the NodePool over fake.InstanceTypesAssorted, with
// the NodePool's requirements as keep: a "linux" group, and a "windows"
// group whose nodes carry kubernetes.io/os=windows (the label the kubelet
// of a Windows node reports).
func iselAssortedGroups(keep func(a iselAssortedType) bool) []*v1alpha1.NodeGroup {
	return iselAssortedGroupsShuffled(keep, nil)
}

// iselAssortedGroupsShuffled is iselAssortedGroups with the catalogue in
// rng's order (Karpenter shuffles it "to ensure we sort everywhere").
func iselAssortedGroupsShuffled(keep func(a iselAssortedType) bool, rng *rand.Rand) []*v1alpha1.NodeGroup {
	byOS := map[string][]v1alpha1.InstanceType{}
	cat := iselAssortedCatalogue()
	if rng != nil {
		rng.Shuffle(len(cat), func(i, j int) { cat[i], cat[j] = cat[j], cat[i] })
	}
	for _, a := range cat {
		if keep == nil || keep(a) {
			byOS[a.os] = append(byOS[a.os], a.instanceTypeVal)
		}
	}
	var out []*v1alpha1.NodeGroup
	if len(byOS["linux"]) > 0 {
		out = append(out, iselKGroup("linux", byOS["linux"], b.TemplateLabel(v1alpha1.LabelOS, "linux")))
	}
	if len(byOS["windows"]) > 0 {
		out = append(out, iselKGroup("windows", byOS["windows"], b.TemplateLabel(v1alpha1.LabelOS, "windows")))
	}
	return out
}

// iselMinPrice is Karpenter's getMinPrice over the whole catalogue.
func iselMinPrice() float64 {
	m := math.Inf(1)
	for _, a := range iselAssortedCatalogue() {
		m = min(m, a.price)
	}
	return m
}

// ---------------------------------------------------------------------------
// Checking a plan as kube-scheduler would see its nodes.

// iselRealLabels are the labels a node launched from the offering reports:
// berth's, and the template's kubernetes.io/os, as the kubelet of a
// Windows node reports it whatever berth writes.
func iselRealLabels(ng *v1alpha1.NodeGroup, it *v1alpha1.InstanceType, off *v1alpha1.Offering) map[string]string {
	l := ng.NodeLabels(it, off)
	if os, ok := ng.Spec.Template.Labels[v1alpha1.LabelOS]; ok {
		l[v1alpha1.LabelOS] = string(os)
	}
	return l
}

type iselPlannedNode struct {
	group  *v1alpha1.NodeGroup
	it     *v1alpha1.InstanceType
	off    *v1alpha1.Offering
	labels map[string]string
	price  float64
	pods   []*corev1.Pod
}

func iselPodRequests(p *corev1.Pod) (cpu, mem int64) {
	for _, c := range p.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
	}
	return
}

// iselCheckPlan fails t unless every pod is planned once, and every new node
// is an offering of its group, at its price, whose labels (required node
// affinity) and capacity (cpu, memory and pod slots of the pods' own
// requests) let kube-scheduler bind the pods berth puts there.
func iselCheckPlan(t *testing.T, groups []*v1alpha1.NodeGroup, pods []*corev1.Pod, plan *scaleup.Plan) []iselPlannedNode {
	t.Helper()
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	seen := map[string]int{}
	var out []iselPlannedNode
	for _, n := range plan.NewNodes {
		var ng *v1alpha1.NodeGroup
		for _, g := range groups {
			if g.Name == n.NodeGroup {
				ng = g
			}
		}
		if ng == nil {
			t.Fatalf("new node %s of unknown group %s", n.Name, n.NodeGroup)
		}
		it, off := ng.FindOffering(n.InstanceType, n.Zone, v1alpha1.CapacityType(n.CapacityType))
		if it == nil {
			t.Fatalf("new node %s: no offering %s/%s/%s in %s", n.Name, n.InstanceType, n.Zone, n.CapacityType, ng.Name)
		}
		price, _ := off.Price()
		if math.Abs(price-n.PricePerHour) > 1e-9 {
			t.Errorf("new node %s: price %v, offering's %v", n.Name, n.PricePerHour, price)
		}
		pn := iselPlannedNode{group: ng, it: it, off: off, labels: iselRealLabels(ng, it, off), price: price}
		node := &corev1.Node{}
		node.Labels = pn.labels
		var cpu, mem int64
		for _, r := range n.Pods {
			p := byName[r.Name]
			if p == nil {
				t.Fatalf("new node %s holds unknown pod %s", n.Name, r.Name)
			}
			seen[r.Name]++
			pn.pods = append(pn.pods, p)
			aff := nodeaffinity.GetRequiredNodeAffinity(p)
			if ok, err := aff.Match(node); err != nil || !ok {
				t.Errorf("pod %s on new node %s (%s/%s/%s of %s, labels %v): its required node affinity does not match (kube-scheduler: NodeAffinity)",
					p.Name, n.Name, it.Name, n.Zone, n.CapacityType, ng.Name, pn.labels)
			}
			c, m := iselPodRequests(p)
			cpu, mem = cpu+c, mem+m
		}
		if cpu > it.Capacity.Cpu().MilliValue() || mem > it.Capacity.Memory().Value() || int64(len(n.Pods)) > it.Capacity.Pods().Value() {
			t.Errorf("new node %s (%s): pods ask %dm cpu, %d memory, %d pods; it has %v", n.Name, it.Name, cpu, mem, len(n.Pods), it.Capacity)
		}
		out = append(out, pn)
	}
	for _, u := range plan.Unschedulable {
		seen[u.Pod.Name]++
	}
	for _, pl := range plan.ExistingNodePlacements {
		seen[pl.Pod.Name]++
	}
	for _, p := range pods {
		if seen[p.Name] != 1 {
			t.Errorf("pod %s is in the plan %d times", p.Name, seen[p.Name])
		}
	}
	return out
}

func iselRunPlan(t *testing.T, groups []*v1alpha1.NodeGroup, pods ...*corev1.Pod) (*scaleup.Plan, []iselPlannedNode) {
	t.Helper()
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: groups, Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	return plan, iselCheckPlan(t, groups, pods, plan)
}

func iselReq(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return b.Expr(key, op, values...)
}

// iselPodWith is test.UnschedulablePod with NodeRequirements.
func iselPodWith(name string, reqs ...corev1.NodeSelectorRequirement) *corev1.Pod {
	if len(reqs) == 0 {
		return b.Pod(name)
	}
	return b.Pod(name, b.RequireNodeAffinity(b.Term(reqs...)))
}

const iselCapacityType = v1alpha1.LabelCapacityType

// ---------------------------------------------------------------------------
// "should schedule on one of the cheapest instances (...)"

func TestKarpenterInstanceSelectionTakesTheCheapestType(t *testing.T) {
	minP := iselMinPrice()
	in := func(vals ...string) func(string) bool { return func(v string) bool { return slices.Contains(vals, v) } }
	type prov struct{ arch, os, zone, ct func(string) bool }
	keep := func(p prov) func(a iselAssortedType) bool {
		return func(a iselAssortedType) bool {
			return (p.arch == nil || p.arch(a.arch)) && (p.os == nil || p.os(a.os)) &&
				(p.zone == nil || p.zone(a.zone)) && (p.ct == nil || p.ct(a.ct))
		}
	}
	cases := []struct {
		name string
		prov prov
		pod  []corev1.NodeSelectorRequirement
		want map[string]string // labels every launched node must have
	}{
		{"should schedule on one of the cheapest instances", prov{}, nil, nil},
		{"(pod arch = amd64)", prov{}, []corev1.NodeSelectorRequirement{iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "amd64")},
			map[string]string{v1alpha1.LabelArch: "amd64"}},
		{"(pod arch = arm64)", prov{}, []corev1.NodeSelectorRequirement{iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "arm64")},
			map[string]string{v1alpha1.LabelArch: "arm64"}},
		{"(prov arch = amd64)", prov{arch: in("amd64")}, nil, map[string]string{v1alpha1.LabelArch: "amd64"}},
		{"(prov arch = arm64)", prov{arch: in("arm64")}, nil, map[string]string{v1alpha1.LabelArch: "arm64"}},
		{"(prov os = windows)", prov{os: in("windows")}, nil, map[string]string{v1alpha1.LabelOS: "windows"}},
		{"(pod os = windows)", prov{}, []corev1.NodeSelectorRequirement{iselReq(v1alpha1.LabelOS, corev1.NodeSelectorOpIn, "windows")},
			map[string]string{v1alpha1.LabelOS: "windows"}},
		{"(pod os = linux)", prov{}, []corev1.NodeSelectorRequirement{iselReq(v1alpha1.LabelOS, corev1.NodeSelectorOpIn, "linux")},
			map[string]string{v1alpha1.LabelOS: "linux"}},
		{"(prov zone = test-zone-2)", prov{zone: in("test-zone-2")}, nil, map[string]string{v1alpha1.LabelZone: "test-zone-2"}},
		{"(pod zone = test-zone-2)", prov{}, []corev1.NodeSelectorRequirement{iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2")},
			map[string]string{v1alpha1.LabelZone: "test-zone-2"}},
		{"(prov ct = spot)", prov{ct: in("spot")}, nil, map[string]string{iselCapacityType: "spot"}},
		{"(pod ct = spot)", prov{}, []corev1.NodeSelectorRequirement{iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "spot")},
			map[string]string{iselCapacityType: "spot"}},
		{"(prov ct = ondemand, prov zone = test-zone-1)", prov{ct: in("on-demand"), zone: in("test-zone-1")}, nil,
			map[string]string{iselCapacityType: "on-demand", v1alpha1.LabelZone: "test-zone-1"}},
		{"(pod ct = spot, pod zone = test-zone-1)", prov{}, []corev1.NodeSelectorRequirement{
			iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "spot"), iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-1")},
			map[string]string{iselCapacityType: "spot", v1alpha1.LabelZone: "test-zone-1"}},
		{"(prov ct = spot, pod zone = test-zone-2)", prov{ct: in("spot")}, []corev1.NodeSelectorRequirement{
			iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2")},
			map[string]string{iselCapacityType: "spot", v1alpha1.LabelZone: "test-zone-2"}},
		{"(prov ct = ondemand/test-zone-1/arm64/windows)", prov{arch: in("arm64"), os: in("windows"), ct: in("on-demand"), zone: in("test-zone-1")}, nil,
			map[string]string{iselCapacityType: "on-demand", v1alpha1.LabelZone: "test-zone-1", v1alpha1.LabelOS: "windows", v1alpha1.LabelArch: "arm64"}},
		{"(prov = spot/test-zone-2, pod = amd64/linux)", prov{arch: in("amd64"), os: in("linux")}, []corev1.NodeSelectorRequirement{
			iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "spot"), iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2")},
			map[string]string{iselCapacityType: "spot", v1alpha1.LabelZone: "test-zone-2", v1alpha1.LabelOS: "linux", v1alpha1.LabelArch: "amd64"}},
		{"(pod ct = spot/test-zone-2/amd64/linux)", prov{}, []corev1.NodeSelectorRequirement{
			iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "amd64"), iselReq(v1alpha1.LabelOS, corev1.NodeSelectorOpIn, "linux"),
			iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "spot"), iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2")},
			map[string]string{iselCapacityType: "spot", v1alpha1.LabelZone: "test-zone-2", v1alpha1.LabelOS: "linux", v1alpha1.LabelArch: "amd64"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range 4 {
				var rng *rand.Rand
				if seed > 0 {
					rng = rand.New(rand.NewSource(int64(seed)))
				}
				groups := iselAssortedGroupsShuffled(keep(tc.prov), rng)
				pod := iselPodWith("pod", tc.pod...)
				plan, nodes := iselRunPlan(t, groups, pod)
				if len(plan.Unschedulable) > 0 || len(nodes) != 1 {
					t.Fatalf("shuffle %d: want one new node for the pod; got %v", seed, summary(plan))
				}
				if math.Abs(nodes[0].price-minP) > 1e-9 {
					t.Errorf("shuffle %d: price %v, want the cheapest %v (%v)", seed, nodes[0].price, minP, summary(plan))
				}
				for k, v := range tc.want {
					if nodes[0].labels[k] != v {
						t.Errorf("shuffle %d: node %s: %s=%q, want %q", seed, nodes[0].it.Name, k, nodes[0].labels[k], v)
					}
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// "should not schedule if no instance type matches selector (...)"

func TestKarpenterInstanceSelectionPlansNothingWhereNoTypeMatches(t *testing.T) {
	noArm := func(a iselAssortedType) bool { return a.arch == "amd64" }
	noArmInZone2 := func(a iselAssortedType) bool { return a.zone != "test-zone-2" || a.arch == "amd64" }
	cases := []struct {
		name   string
		groups []*v1alpha1.NodeGroup
		pod    *corev1.Pod
	}{
		{"(pod arch = arm)", iselAssortedGroups(noArm), iselPodWith("pod", iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "arm64"))},
		{"(pod arch = arm zone=test-zone-2)", iselAssortedGroups(noArmInZone2), iselPodWith("pod",
			iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "arm64"), iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2"))},
		{"(prov arch = arm / pod zone=test-zone-2)", iselAssortedGroups(func(a iselAssortedType) bool { return noArmInZone2(a) && a.arch == "arm64" }),
			iselPodWith("pod", iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, _ := iselRunPlan(t, tc.groups, tc.pod)
			if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 1 {
				t.Errorf("want no node and the pod unschedulable; got %v", summary(plan))
			}
		})
	}
}

// ---------------------------------------------------------------------------
// "should schedule on an instance with enough resources"

func TestKarpenterInstanceSelectionTakesATypeThatHoldsThePods(t *testing.T) {
	groups := iselAssortedGroupsShuffled(nil, rand.New(rand.NewSource(7)))
	for _, cpu := range []float64{0.1, 1.0, 2, 2.5, 4, 8, 16} {
		for _, mem := range []float64{0.1, 1.0, 2, 4, 8, 16, 32} {
			c, m := fmt.Sprintf("%0.1f", cpu), fmt.Sprintf("%0.1fGi", mem)
			t.Run(c+"cpu-"+m, func(t *testing.T) {
				pods := replicas("p", 3, b.CPU(c), b.Memory(m))
				plan, nodes := iselRunPlan(t, groups, pods...)
				if len(plan.Unschedulable) > 0 {
					t.Fatalf("unschedulable: %v", summary(plan))
				}
				// Karpenter: the three fit one node, the cheapest that
				// holds them. berth may do as well or better.
				cq, mq := resource.MustParse(c), resource.MustParse(m)
				best := math.Inf(1)
				for _, g := range groups {
					for _, it := range g.Spec.InstanceTypes {
						if 3*cq.MilliValue() <= it.Capacity.Cpu().MilliValue() && 3*mq.Value() <= it.Capacity.Memory().Value() {
							p, _ := it.Offerings[0].Price()
							best = min(best, p)
						}
					}
				}
				total := 0.0
				for _, n := range nodes {
					total += n.price
				}
				if total > best+1e-9 {
					t.Errorf("plan costs %v on %d nodes; one node of %v holds all three (%v)", total, len(nodes), best, summary(plan))
				}
				if len(nodes) != 1 {
					t.Logf("note: %d nodes at %v (Karpenter: one at %v)", len(nodes), total, best)
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// "should schedule on cheaper on-demand instance even when spot price
// ordering would place other instance types first"

func TestKarpenterInstanceSelectionTakesOnDemandWhereItIsCheaper(t *testing.T) {
	types := func(ct ...string) []v1alpha1.InstanceType {
		mk := func(name string, od, spot float64) v1alpha1.InstanceType {
			var offs []v1alpha1.Offering
			if slices.Contains(ct, "on-demand") {
				offs = append(offs, v1alpha1.Offering{Zone: "test-zone-1a", CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: iselPriceStr(od)})
			}
			if slices.Contains(ct, "spot") {
				offs = append(offs, v1alpha1.Offering{Zone: "test-zone-1a", CapacityType: v1alpha1.CapacityTypeSpot, PricePerHour: iselPriceStr(spot)})
			}
			return iselKType(name, "1", "1Gi", "amd64", offs...)
		}
		return []v1alpha1.InstanceType{mk("test-instance2", 1.3, 0.1), mk("test-instance1", 1.0, 0.2)}
	}
	t.Run("nodepool requires on-demand", func(t *testing.T) {
		groups := []*v1alpha1.NodeGroup{iselKGroup("default", types("on-demand"))}
		plan, _ := iselRunPlan(t, groups, iselPodWith("pod"))
		want := []string{"new test-zone-1a/on-demand/test-instance1: pod"}
		if got := summary(plan); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("pod requires on-demand, group offers both", func(t *testing.T) {
		groups := []*v1alpha1.NodeGroup{iselKGroup("default", types("on-demand", "spot"))}
		plan, _ := iselRunPlan(t, groups, iselPodWith("pod", iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "on-demand")))
		want := []string{"new test-zone-1a/on-demand/test-instance1: pod"}
		if got := summary(plan); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// ---------------------------------------------------------------------------
// MinValues: what each case says the choice is without minValues. Per-
// instance-type labels (karpenter/numerical-value) are a group's template
// label, one group per instance type.

func TestKarpenterMinValuesCasesTakeTheCheapestTypeWithoutMinValues(t *testing.T) {
	spot := func(p float64) v1alpha1.Offering {
		return v1alpha1.Offering{Zone: "test-zone-1-spot", CapacityType: v1alpha1.CapacityTypeSpot, PricePerHour: iselPriceStr(p)}
	}
	const gen = "karpenter/numerical-value"
	type it struct {
		name, cpu, arch string
		price           float64
		gen             string
	}
	oneGroup := func(its ...it) []*v1alpha1.NodeGroup {
		var types []v1alpha1.InstanceType
		for _, x := range its {
			types = append(types, iselKType(x.name, x.cpu, x.cpu+"Gi", x.arch, spot(x.price)))
		}
		return []*v1alpha1.NodeGroup{iselKGroup("default", types)}
	}
	groupPerType := func(its ...it) []*v1alpha1.NodeGroup {
		var out []*v1alpha1.NodeGroup
		for _, x := range its {
			out = append(out, iselKGroup("g-"+x.name, []v1alpha1.InstanceType{iselKType(x.name, x.cpu, x.cpu+"Gi", x.arch, spot(x.price))},
				b.TemplateLabel(gen, x.gen)))
		}
		return out
	}
	pods := func(reqs ...corev1.NodeSelectorRequirement) []*corev1.Pod {
		var opts []b.PodOption
		opts = append(opts, b.CPU("0.9"), b.Memory("0.9Gi"))
		if len(reqs) > 0 {
			opts = append(opts, b.RequireNodeAffinity(b.Term(reqs...)))
		}
		return replicas("pod", 2, opts...)
	}
	it1, it2 := it{"instance-type-1", "1", "arm64", 0.52, "2"}, it{"instance-type-2", "4", "arm64", 1.0, "3"}
	cases := []struct {
		name   string
		groups []*v1alpha1.NodeGroup
		pods   []*corev1.Pod
		want   []string
	}{
		{"should schedule respecting the minValues from instance-type requirements",
			oneGroup(it1, it2), pods(), []string{"new test-zone-1-spot/spot/instance-type-2: pod-1,pod-2"}},
		{"should schedule respecting the minValues in Gt operator",
			groupPerType(it1, it{"instance-type-2", "1", "arm64", 1.0, "3"}, it{"instance-type-3", "4", "arm64", 1.2, "4"}),
			pods(iselReq(gen, corev1.NodeSelectorOpGt, "2")), []string{"new test-zone-1-spot/spot/instance-type-3: pod-1,pod-2"}},
		{"scheduler should fail if the minValues in Gt operator is not satisfied",
			groupPerType(it1, it2), pods(iselReq(gen, corev1.NodeSelectorOpGt, "2")),
			[]string{"new test-zone-1-spot/spot/instance-type-2: pod-1,pod-2"}},
		{"should schedule respecting the minValues in Lt operator",
			groupPerType(it1, it{"instance-type-2", "2", "arm64", 1.0, "3"}, it{"instance-type-3", "4", "arm64", 1.2, "4"}),
			pods(iselReq(gen, corev1.NodeSelectorOpLt, "4")), []string{"new test-zone-1-spot/spot/instance-type-2: pod-1,pod-2"}},
		{"scheduler should fail if the minValues in Lt operator is not satisfied",
			groupPerType(it{"instance-type-1", "2", "arm64", 0.52, "2"}, it{"instance-type-2", "4", "arm64", 1.2, "4"}),
			pods(iselReq(gen, corev1.NodeSelectorOpLt, "4")), []string{"new test-zone-1-spot/spot/instance-type-1: pod-1,pod-2"}},
		{"should schedule considering the max of the minValues of In and NotIn operators in the instance-type requirements",
			oneGroup(it1, it{"instance-type-2", "2", "arm64", 1.0, ""}, it{"instance-type-3", "4", "arm64", 1.2, ""}),
			pods(iselReq(v1alpha1.LabelInstanceType, corev1.NodeSelectorOpIn, "instance-type-1", "instance-type-2", "instance-type-3"),
				iselReq(v1alpha1.LabelInstanceType, corev1.NodeSelectorOpNotIn, "instance-type-3")),
			[]string{"new test-zone-1-spot/spot/instance-type-2: pod-1,pod-2"}},
		{"should schedule considering the max of the minValues of Gt and Lt operators.",
			groupPerType(it1, it{"instance-type-2", "1", "arm64", 1.0, "3"}, it{"instance-type-3", "4", "arm64", 1.2, "4"}, it{"instance-type-4", "4", "arm64", 1.2, "5"}),
			pods(iselReq(gen, corev1.NodeSelectorOpGt, "2"), iselReq(gen, corev1.NodeSelectorOpLt, "5")),
			[]string{"new test-zone-1-spot/spot/instance-type-3: pod-1,pod-2"}},
		{"should schedule and pick the max of minValues of InstanceTypes if multiple operators are used for the same requirement.",
			oneGroup(it1, it2), pods(iselReq(v1alpha1.LabelInstanceType, corev1.NodeSelectorOpExists),
				iselReq(v1alpha1.LabelInstanceType, corev1.NodeSelectorOpIn, "instance-type-1", "instance-type-2")),
			[]string{"new test-zone-1-spot/spot/instance-type-2: pod-1,pod-2"}},
		{"should schedule and respect multiple requirement keys with minValues",
			oneGroup(it1, it{"instance-type-2", "4", "amd64", 1.0, ""}), pods(iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpExists),
				iselReq(v1alpha1.LabelInstanceType, corev1.NodeSelectorOpIn, "instance-type-1", "instance-type-2")),
			[]string{"new test-zone-1-spot/spot/instance-type-2: pod-1,pod-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, _ := iselRunPlan(t, tc.groups, tc.pods...)
			if got := summary(plan); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Beyond Karpenter's suite: instance selection where a pod's constraints
// on per-option labels (arch, capacity type, instance type) combine with
// the zone, with other pods' constraints, with pod slots and with
// DaemonSets.

func TestInstanceSelectionBeyondKarpentersSuite(t *testing.T) {
	od := func(zone string, p float64) v1alpha1.Offering {
		return v1alpha1.Offering{Zone: zone, CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: iselPriceStr(p)}
	}
	sp := func(zone string, p float64) v1alpha1.Offering {
		return v1alpha1.Offering{Zone: zone, CapacityType: v1alpha1.CapacityTypeSpot, PricePerHour: iselPriceStr(p)}
	}
	type tcase struct {
		name   string
		groups []*v1alpha1.NodeGroup
		ds     []*corev1.Pod
		pods   []*corev1.Pod
		want   []string
		unav   []scaleup.Offering
	}
	cases := []tcase{
		{name: "an unavailable offering is passed over for the next cheapest",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("a", "2", "2Gi", "amd64", sp("z1", 0.01), od("z1", 0.10)),
				iselKType("b", "2", "2Gi", "amd64", sp("z1", 0.05)),
			})},
			unav: []scaleup.Offering{{NodeGroup: "g", InstanceType: "a", Zone: "z1", CapacityType: "spot"}},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("1"))},
			want: []string{"new z1/spot/b: p"}},
		{name: "an init container larger than the app sizes the node",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("s", "1", "1Gi", "amd64", od("z1", 0.1)),
				iselKType("m", "2", "2Gi", "amd64", od("z1", 0.2)),
			})},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("100m"), b.InitContainer("init", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}))},
			want: []string{"new z1/on-demand/m: p"}},
		{name: "pod overhead sizes the node",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("s", "1", "1Gi", "amd64", od("z1", 0.1)),
				iselKType("m", "2", "2Gi", "amd64", od("z1", 0.2)),
			})},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("800m"), b.Overhead(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}))},
			want: []string{"new z1/on-demand/m: p"}},
		{name: "ORed terms pair arch with zone",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("arm-z1", "2", "2Gi", "arm64", od("z1", 0.01)),
				iselKType("amd-z1", "2", "2Gi", "amd64", od("z1", 0.30)),
				iselKType("amd-z2", "2", "2Gi", "amd64", od("z2", 0.02)),
				iselKType("arm-z2", "2", "2Gi", "arm64", od("z2", 0.20)),
			})},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("1"),
				b.RequireNodeAffinity(b.Term(iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "amd64"), iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "z1"))),
				b.RequireNodeAffinity(b.Term(iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "arm64"), iselReq(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, "z2"))))},
			want: []string{"new z2/on-demand/arm-z2: p"}},
		{name: "ORed terms pair arch with capacity type",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("arm", "2", "2Gi", "arm64", od("z1", 0.30), sp("z1", 0.01)),
				iselKType("amd", "2", "2Gi", "amd64", od("z1", 0.02), sp("z1", 0.20)),
			})},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("1"),
				b.RequireNodeAffinity(b.Term(iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "amd64"), iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "spot"))),
				b.RequireNodeAffinity(b.Term(iselReq(v1alpha1.LabelArch, corev1.NodeSelectorOpIn, "arm64"), iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "on-demand"))))},
			want: []string{"new z1/spot/amd: p"}},
		{name: "two pods, one needs arm64, one spot: one arm64 spot node when cheaper",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("arm-1", "1", "1Gi", "arm64", od("z1", 0.10)),
				iselKType("amd-1", "1", "1Gi", "amd64", sp("z1", 0.10)),
				iselKType("arm-2", "2", "2Gi", "arm64", sp("z1", 0.15)),
			})},
			pods: []*corev1.Pod{b.Pod("a", b.CPU("500m"), b.NodeSelector(v1alpha1.LabelArch, "arm64")), b.Pod("s", b.CPU("500m"), b.NodeSelector(iselCapacityType, "spot"))},
			want: []string{"new z1/spot/arm-2: a,s"}},
		{name: "two pods, one needs arm64, one spot: two nodes when cheaper",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("arm-1", "1", "1Gi", "arm64", od("z1", 0.10)),
				iselKType("amd-1", "1", "1Gi", "amd64", sp("z1", 0.10)),
				iselKType("arm-2", "2", "2Gi", "arm64", sp("z1", 0.25)),
			})},
			pods: []*corev1.Pod{b.Pod("a", b.CPU("500m"), b.NodeSelector(v1alpha1.LabelArch, "arm64")), b.Pod("s", b.CPU("500m"), b.NodeSelector(iselCapacityType, "spot"))},
			want: []string{"new z1/on-demand/arm-1: a", "new z1/spot/amd-1: s"}},
		{name: "six pods on types of five pod slots",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{iselKType("t", "4", "4Gi", "amd64", od("z1", 0.4))})},
			pods:   iselReplicas("p", 6, b.CPU("10m")),
			want:   []string{"new z1/on-demand/t: p-1,p-2,p-3,p-4,p-5", "new z1/on-demand/t: p-6"}},
		{name: "NotIn capacity type and instance type",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("a", "2", "2Gi", "amd64", od("z1", 0.30), sp("z1", 0.01)),
				iselKType("b", "2", "2Gi", "amd64", od("z1", 0.02), sp("z1", 0.01)),
				iselKType("c", "2", "2Gi", "amd64", od("z1", 0.05), sp("z1", 0.01)),
			})},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("1"), b.RequireNodeAffinity(b.Term(
				iselReq(iselCapacityType, corev1.NodeSelectorOpNotIn, "spot"), iselReq(v1alpha1.LabelInstanceTypeBeta, corev1.NodeSelectorOpNotIn, "b"))))},
			want: []string{"new z1/on-demand/c: p"}},
		{name: "beta arch and zone labels",
			groups: iselAssortedGroups(func(a iselAssortedType) bool { return a.cpu <= 2 && a.mem <= 2 }),
			pods: []*corev1.Pod{b.Pod("p", b.NodeSelector(v1alpha1.LabelArchBeta, "arm64", v1alpha1.LabelZoneBeta, "test-zone-2", v1alpha1.LabelOSBeta, "linux"),
				b.RequireNodeAffinity(b.Term(iselReq(iselCapacityType, corev1.NodeSelectorOpIn, "spot"))))},
			want: []string{"new test-zone-2/spot/1-cpu-1-mem-arm64-linux-test-zone-2-spot: p"}},
		{name: "Gt compares numbers, not strings",
			groups: []*v1alpha1.NodeGroup{
				iselKGroup("g9", []v1alpha1.InstanceType{iselKType("t9", "2", "2Gi", "amd64", od("z1", 0.1))}, b.TemplateLabel("gen", "9")),
				iselKGroup("g10", []v1alpha1.InstanceType{iselKType("t10", "2", "2Gi", "amd64", od("z1", 0.2))}, b.TemplateLabel("gen", "10")),
			},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("1"), b.RequireNodeAffinity(b.Term(iselReq("gen", corev1.NodeSelectorOpGt, "9"))))},
			want: []string{"new z1/on-demand/t10: p"}},
		{name: "an amd64-only DaemonSet makes the arm64 type the one that holds the pod",
			groups: []*v1alpha1.NodeGroup{iselKGroup("g", []v1alpha1.InstanceType{
				iselKType("amd", "2.1", "4Gi", "amd64", od("z1", 0.10)),
				iselKType("arm", "2.1", "4Gi", "arm64", od("z1", 0.11)),
			})},
			ds:   []*corev1.Pod{b.Pod("agent", b.CPU("1500m"), b.NodeSelector(v1alpha1.LabelArch, "amd64"))},
			pods: []*corev1.Pod{b.Pod("p", b.CPU("1"))},
			want: []string{"new z1/on-demand/arm: p"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := scaleup.Input{NodeGroups: tc.groups, Pending: tc.pods, Unavailable: tc.unav}
			for _, d := range tc.ds {
				ds := b.DaemonSet(d.Name)
				ds.Spec.Template.Spec = d.Spec
				in.DaemonSets = append(in.DaemonSets, ds)
			}
			plan, err := scaleup.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			iselCheckPlan(t, tc.groups, tc.pods, plan)
			if got := summary(plan); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func iselReplicas(prefix string, n int, opts ...b.PodOption) []*corev1.Pod {
	return replicas(prefix, n, opts...)
}
