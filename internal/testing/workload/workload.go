// Package workload generates the seeded benchmark workload: a node group
// with many instance types and a mix of pending pods. The bench module
// feeds the same pods to Karpenter's scheduler, and its catalogue mirrors
// Karpenter's fake cloud provider (sigs.k8s.io/karpenter/pkg/cloudprovider/fake
// InstanceTypes): type i has i+1 cpu, 2(i+1) Gi memory, 10(i+1) pods, a
// kube-reserved overhead of 100m cpu and 10Mi memory, and offerings spot in
// zones 1-2 and on-demand in zones 1-3, all priced 0.1 per cpu + 0.1 per GB.
package workload

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Zones of the catalogue.
var Zones = []string{"test-zone-1", "test-zone-2", "test-zone-3"}

// Price is the hourly price of an instance with the given capacity, as in
// Karpenter's fake cloud provider.
func Price(cpu, memoryBytes float64) float64 { return 0.1*cpu + 0.1*memoryBytes/1e9 }

// NodeGroup returns a node group "bench" with n instance types.
func NodeGroup(n int) *v1alpha1.NodeGroup {
	ng := &v1alpha1.NodeGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: v1alpha1.NodeGroupSpec{
			MaxSize:  10000,
			Provider: v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{}},
		},
	}
	for i := range n {
		cpu, memGi := int64(i+1), int64(2*(i+1))
		price := fmt.Sprintf("%.6f", Price(float64(cpu), float64(memGi<<30)))
		it := v1alpha1.InstanceType{
			Name: fmt.Sprintf("fake-it-%d", i),
			// Allocatable = capacity minus Karpenter's fake kube-reserved.
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu*1000-100, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(memGi<<30-10<<20, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(10*(cpu), resource.DecimalSI),
			},
			Architecture: "amd64",
		}
		for _, o := range []struct {
			zone string
			ct   v1alpha1.CapacityType
		}{{Zones[0], v1alpha1.CapacityTypeSpot}, {Zones[1], v1alpha1.CapacityTypeSpot},
			{Zones[0], v1alpha1.CapacityTypeOnDemand}, {Zones[1], v1alpha1.CapacityTypeOnDemand}, {Zones[2], v1alpha1.CapacityTypeOnDemand}} {
			it.Offerings = append(it.Offerings, v1alpha1.Offering{Zone: o.zone, CapacityType: o.ct, PricePerHour: price})
		}
		ng.Spec.InstanceTypes = append(ng.Spec.InstanceTypes, it)
	}
	return ng
}

// Pods returns n pending pods, seeded: one fifth each of plain pods,
// zone-spread pods, hostname-spread pods, zone self-affinity pods and
// hostname self-anti-affinity pods (the rest plain), with cpu from {100,
// 250, 500, 1000, 1500}m and memory from {100, 256, 512, 1024, 2048,
// 4096}Mi — the mix of Karpenter's scheduling benchmark.
func Pods(n int, seed int64) []*corev1.Pod {
	g := &gen{r: rand.New(rand.NewSource(seed))}
	per := n / 5
	for range per {
		g.add(g.labels("my-label"), nil)
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		for range per {
			g.add(g.labels("my-label"), func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
					LabelSelector: &metav1.LabelSelector{MatchLabels: g.labels("my-label")},
				}}
			})
		}
	}
	for range per {
		l := g.labels("my-affinity")
		g.add(l, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: l}},
			}}}
		})
	}
	anti := map[string]string{"app": "nginx"}
	for range per {
		g.add(anti, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: anti}},
			}}}
		})
	}
	for len(g.pods) < n {
		g.add(g.labels("my-label"), nil)
	}
	return g.pods
}

type gen struct {
	r    *rand.Rand
	pods []*corev1.Pod
}

func (g *gen) labels(key string) map[string]string {
	values := []string{"a", "b", "c", "d", "e", "f", "g"}
	return map[string]string{key: values[g.r.Intn(len(values))]}
}

func (g *gen) add(labels map[string]string, mutate func(*corev1.Pod)) {
	cpus := []int64{100, 250, 500, 1000, 1500}
	mems := []int64{100, 256, 512, 1024, 2048, 4096}
	name := fmt.Sprintf("pod-%d", len(g.pods))
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(cpus[g.r.Intn(len(cpus))], resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(mems[g.r.Intn(len(mems))]<<20, resource.BinarySI),
			}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if mutate != nil {
		mutate(p)
	}
	g.pods = append(g.pods, p)
}

// LowerBound is a lower bound on the hourly price of any plan that runs
// the pods on new nodes of the group, for cpu and for memory, whichever
// is larger. Two facts hold for every plan: its nodes' allocatable adds
// up to at least what the pods request (R), and it has at least
// MinNodes(pods) nodes (K). Take any line price >= a*allocatable + b with
// a, b >= 0 that stays at or under every offering's price: a plan of n
// nodes then costs at least a*R + b*n >= a*R + b*K. The best such line is
// the cheapest price per unit through the origin (b = 0: the bound of
// requests alone, RequestsLowerBound) or an edge of the lower convex hull
// of the offerings' (allocatable, price) points. In this catalogue every
// offering costs the same per unit of capacity, and capacity is
// allocatable plus the 100m (10Mi) each type reserves, so the line is
// price per unit times (allocatable + reserve): each of the K nodes pays
// for its reserve.
func LowerBound(ng *v1alpha1.NodeGroup, pods []*corev1.Pod) float64 {
	cpuPts, memPts := offeringPoints(ng)
	cpu, mem := requests(pods)
	k := float64(MinNodes(pods))
	return max(lineBound(cpuPts, cpu, k), lineBound(memPts, mem, k))
}

// RequestsLowerBound is the bound of earlier measurements: the cheapest
// price per cpu times the total cpu requested, or the cheapest price per
// byte of memory times the total memory requested, whichever is larger.
// It leaves out what each node reserves.
func RequestsLowerBound(ng *v1alpha1.NodeGroup, pods []*corev1.Pod) float64 {
	cpuPts, memPts := offeringPoints(ng)
	cpu, mem := requests(pods)
	return max(lineBound(cpuPts, cpu, 0), lineBound(memPts, mem, 0))
}

// MinNodes is a number of nodes every plan needs at least: one when there
// are pods, and one for each pod of the largest set of pods that carry the
// same required hostname anti-affinity term and match its selector (no two
// of them may share a node). A pod counts once in a set, however many
// times it carries the term; terms that name namespaces or merge the
// pod's own label values (matchLabelKeys, mismatchLabelKeys) are left
// out, which can only lower the count.
func MinNodes(pods []*corev1.Pod) int {
	if len(pods) == 0 {
		return 0
	}
	type term struct{ namespace, selector string }
	most, count := 1, map[term]int{}
	for _, p := range pods {
		if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
			continue
		}
		seen := map[term]bool{}
		for _, t := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
			if t.TopologyKey != corev1.LabelHostname || err != nil || t.NamespaceSelector != nil || len(t.Namespaces) > 0 ||
				len(t.MatchLabelKeys) > 0 || len(t.MismatchLabelKeys) > 0 || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			key := term{p.Namespace, metav1.FormatLabelSelector(t.LabelSelector)}
			if seen[key] {
				continue
			}
			seen[key] = true
			count[key]++
			most = max(most, count[key])
		}
	}
	return most
}

// point is an offering's allocatable of one resource and its price.
type point struct{ alloc, price float64 }

func offeringPoints(ng *v1alpha1.NodeGroup) (cpu, mem []point) {
	for _, it := range ng.Spec.InstanceTypes {
		c := it.Capacity.Cpu().AsApproximateFloat64()
		m := it.Capacity.Memory().AsApproximateFloat64()
		for _, o := range it.Offerings {
			price, err := o.Price()
			if err != nil {
				continue // an offering berth cannot price, it never plans
			}
			cpu = append(cpu, point{c, price})
			mem = append(mem, point{m, price})
		}
	}
	return cpu, mem
}

func requests(pods []*corev1.Pod) (cpu, mem float64) {
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().AsApproximateFloat64()
			mem += c.Resources.Requests.Memory().AsApproximateFloat64()
		}
	}
	return cpu, mem
}

// lineBound is the largest a*requested + b*nodes over the lines
// price = a*alloc + b (a, b >= 0) that no point lies under: the two lines
// through an axis (b = 0 at the cheapest price per unit, a = 0 at the
// cheapest price) and the edges of the points' lower convex hull.
func lineBound(pts []point, requested, nodes float64) float64 {
	if len(pts) == 0 {
		return 0
	}
	perUnit, cheapest := math.Inf(1), math.Inf(1)
	for _, p := range pts {
		if p.alloc > 0 { // a type without the resource bounds b alone
			perUnit = min(perUnit, p.price/p.alloc)
		}
		cheapest = min(cheapest, p.price)
	}
	if math.IsInf(perUnit, 1) {
		perUnit = 0
	}
	best := max(perUnit*requested, cheapest*nodes)
	sorted := slices.Clone(pts)
	slices.SortFunc(sorted, func(x, y point) int {
		return cmp.Or(cmp.Compare(x.alloc, y.alloc), cmp.Compare(x.price, y.price))
	})
	var hull []point // lower hull, left to right (Andrew's monotone chain)
	for _, p := range sorted {
		for len(hull) >= 2 && cross(hull[len(hull)-2], hull[len(hull)-1], p) <= 0 {
			hull = hull[:len(hull)-1]
		}
		hull = append(hull, p)
	}
	for i := 1; i < len(hull); i++ {
		l, r := hull[i-1], hull[i]
		if r.alloc == l.alloc {
			continue
		}
		a := (r.price - l.price) / (r.alloc - l.alloc)
		b := l.price - a*l.alloc
		if a >= 0 && b >= 0 {
			best = max(best, a*requested+b*nodes)
		}
	}
	return best
}

// cross is the z of (b-o) x (c-o): positive when o, b, c turn left.
func cross(o, b, c point) float64 {
	return (b.alloc-o.alloc)*(c.price-o.price) - (b.price-o.price)*(c.alloc-o.alloc)
}
