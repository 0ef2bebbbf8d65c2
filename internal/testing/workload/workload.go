// Package workload generates the seeded benchmark workload: a node group
// with many instance types and a mix of pending pods. The bench module
// feeds the same pods to Karpenter's scheduler, and its catalogue mirrors
// Karpenter's fake cloud provider (sigs.k8s.io/karpenter/pkg/cloudprovider/fake
// InstanceTypes): type i has i+1 cpu, 2(i+1) Gi memory, 10(i+1) pods, a
// kube-reserved overhead of 100m cpu and 10Mi memory, and offerings spot in
// zones 1-2 and on-demand in zones 1-3, all priced 0.1 per cpu + 0.1 per GB.
package workload

import (
	"fmt"
	"math"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// the pods on nodes of the group: the cheapest price per cpu times the
// total cpu requested, or the cheapest price per byte of memory times the
// total memory requested, whichever is larger.
func LowerBound(ng *v1alpha1.NodeGroup, pods []*corev1.Pod) float64 {
	perCPU, perByte := math.Inf(1), math.Inf(1)
	for _, it := range ng.Spec.InstanceTypes {
		cpu := it.Capacity.Cpu().AsApproximateFloat64()
		mem := it.Capacity.Memory().AsApproximateFloat64()
		for _, o := range it.Offerings {
			var price float64
			_, _ = fmt.Sscanf(o.PricePerHour, "%g", &price)
			perCPU = min(perCPU, price/cpu)
			perByte = min(perByte, price/mem)
		}
	}
	var cpu, mem float64
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().AsApproximateFloat64()
			mem += c.Resources.Requests.Memory().AsApproximateFloat64()
		}
	}
	return max(perCPU*cpu, perByte*mem)
}
