package scaleup_test

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestCARandomLimitsInvariants: random groups, limits, nodes and pods;
// the plan never passes maxSize, a group limit or a cluster limit (CA's
// orchestrator caps every expansion option by them).
func TestCARandomLimitsInvariants(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomLimits(t, seed) })
	}
}

func randomLimits(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	var stats [3]int
	defer func() { t.Logf("new nodes %d, unschedulable %d, placed %d", stats[0], stats[1], stats[2]) }()
	n := 3000
	if testing.Short() {
		n = 500
	}
	for iter := 0; iter < n; iter++ {
		var groups []*v1alpha1.NodeGroup
		gpus := map[string]int64{}
		caps := map[string]map[string]int64{} // group -> type -> milli cpu
		mems := map[string]map[string]int64{}
		for gi := 0; gi < 1+r.Intn(3); gi++ {
			name := fmt.Sprintf("g%d", gi)
			opts := []b.NodeGroupOption{}
			minS := int32(r.Intn(2))
			maxS := minS + int32(r.Intn(4))
			opts = append(opts, b.Size(minS, maxS))
			caps[name] = map[string]int64{}
			mems[name] = map[string]int64{}
			for ti := 0; ti < 1+r.Intn(3); ti++ {
				cpu := []int64{1, 2, 4, 8}[r.Intn(4)]
				it := fmt.Sprintf("%s-t%d", name, ti)
				caps[name][it] = cpu * 1000
				mems[name][it] = cpu * 4 << 30
				offs := []v1alpha1.Offering{b.OnDemand("zone-a", fmt.Sprintf("%.3f", 0.05*float64(cpu)+0.01*float64(ti)))}
				if r.Intn(2) == 0 {
					offs = append(offs, b.Spot("zone-b", fmt.Sprintf("%.3f", 0.02*float64(cpu))))
				}
				opts = append(opts, b.InstanceType(it, fmt.Sprint(cpu), fmt.Sprintf("%dGi", cpu*4), offs...))
				if gi == 0 && ti > 0 {
					gpus[name+"/"+it] = int64(1 + r.Intn(4))
					opts = append(opts, b.ExtraCapacity("nvidia.com/gpu", fmt.Sprint(gpus[name+"/"+it])))
				}
			}
			if r.Intn(3) == 0 {
				opts = append(opts, b.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(2+r.Intn(12)), resource.DecimalSI)}))
			}
			groups = append(groups, b.NodeGroup(name, opts...))
		}
		cl := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(4+r.Intn(30)), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("4000Gi"),
			"nvidia.com/gpu": *resource.NewQuantity(int64(r.Intn(8)), resource.DecimalSI)}
		var gpuTotal, gpuAdded int64
		var nodes []*corev1.Node
		var bound []*corev1.Pod
		existing := map[string]int{}
		var total int64
		groupCPU := map[string]int64{}
		for ni := 0; ni < r.Intn(4); ni++ {
			g := groups[r.Intn(len(groups))]
			it := g.Spec.InstanceTypes[r.Intn(len(g.Spec.InstanceTypes))]
			off := it.Offerings[0]
			name := fmt.Sprintf("n%d", ni)
			nd := groupNode(name, g, it.Name, off.Zone, off.CapacityType)
			if k := gpus[g.Name+"/"+it.Name]; k > 0 {
				gpuTotal += k
				if r.Intn(2) == 0 {
					b.NodeAllocatable("nvidia.com/gpu", fmt.Sprint(k))(nd)
				} else {
					gpuTotal -= k
				}
			}
			b.LaunchedBy(g)(nd)
			if r.Intn(4) == 0 {
				b.Booting()(nd)
			}
			nodes = append(nodes, nd)
			existing[g.Name]++
			total += caps[g.Name][it.Name]
			groupCPU[g.Name] += caps[g.Name][it.Name]
			if r.Intn(2) == 0 {
				bound = append(bound, boundTo(b.Pod(fmt.Sprintf("b%d", ni), b.CPU(fmt.Sprintf("%dm", caps[g.Name][it.Name]*3/4))), name))
			}
		}
		var pending []*corev1.Pod
		for pi := 0; pi < r.Intn(8); pi++ {
			opts := []b.PodOption{b.CPU(fmt.Sprintf("%dm", 100+r.Intn(5000)))}
			if r.Intn(4) == 0 {
				opts = append(opts, b.Request("nvidia.com/gpu", fmt.Sprint(1+r.Intn(2))))
			}
			if r.Intn(4) == 0 {
				opts = append(opts, b.Labels("app", "x"), b.PodAntiAffinity(b.AffinityTerm(corev1.LabelHostname, "app", "x")))
			}
			pending = append(pending, b.Pod(fmt.Sprintf("p%d", pi), opts...))
		}
		in := scaleup.Input{NodeGroups: groups, Nodes: nodes, Pods: bound, Pending: pending, Limits: scaleup.Limits{Resources: cl}}
		plan, err := scaleup.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		stats[0] += len(plan.NewNodes)
		stats[1] += len(plan.Unschedulable)
		stats[2] += len(plan.ExistingNodePlacements)
		added := map[string]int{}
		addedCPU := map[string]int64{}
		var addedTotal int64
		for _, nn := range plan.NewNodes {
			added[nn.NodeGroup]++
			c := caps[nn.NodeGroup][nn.InstanceType]
			addedCPU[nn.NodeGroup] += c
			addedTotal += c
			gpuAdded += gpus[nn.NodeGroup+"/"+nn.InstanceType]
			if nn.Reason == scaleup.ReasonPendingPods && len(nn.Pods) == 0 {
				t.Errorf("iter %d: node %s for pending pods holds none", iter, nn.Name)
			}
		}
		fail := false
		for _, g := range groups {
			if added[g.Name] > 0 && existing[g.Name]+added[g.Name] > int(g.Spec.MaxSize) {
				t.Errorf("iter %d: group %s: %d existing + %d new > maxSize %d", iter, g.Name, existing[g.Name], added[g.Name], g.Spec.MaxSize)
				fail = true
			}
			if q, ok := g.Spec.Limits[corev1.ResourceCPU]; ok && addedCPU[g.Name] > 0 && groupCPU[g.Name]+addedCPU[g.Name] > q.MilliValue() {
				t.Errorf("iter %d: group %s: cpu %d + %d > limit %d", iter, g.Name, groupCPU[g.Name], addedCPU[g.Name], q.MilliValue())
				fail = true
			}
		}
		if q := cl["nvidia.com/gpu"]; gpuAdded > 0 && gpuTotal+gpuAdded > q.Value() {
			t.Errorf("iter %d: cluster gpus %d + %d > limit %d", iter, gpuTotal, gpuAdded, q.Value())
			fail = true
		}
		if q := cl[corev1.ResourceCPU]; addedTotal > 0 && total+addedTotal > q.MilliValue() {
			t.Errorf("iter %d: cluster cpu %d + %d > limit %d", iter, total, addedTotal, q.MilliValue())
			fail = true
		}
		// A pod left pending while a fresh node of some group, within
		// maxSize and the limits left after the plan, would hold it alone.
		cpuOf := func(p *corev1.Pod) int64 { return p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() }
		for _, u := range plan.Unschedulable {
			var pod *corev1.Pod
			for _, p := range pending {
				if p.Name == u.Pod.Name {
					pod = p
				}
			}
			if _, ok := pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; ok {
				continue
			}
			for _, g := range groups {
				if existing[g.Name]+added[g.Name] >= int(g.Spec.MaxSize) {
					continue
				}
				for it, c := range caps[g.Name] {
					if c < cpuOf(pod) {
						continue
					}
					if q := cl["nvidia.com/gpu"]; gpus[g.Name+"/"+it] > 0 && gpuTotal+gpuAdded+gpus[g.Name+"/"+it] > q.Value() {
						continue
					}
					if q := cl[corev1.ResourceCPU]; total+addedTotal+c > q.MilliValue() {
						continue
					}
					if q, ok := g.Spec.Limits[corev1.ResourceCPU]; ok && groupCPU[g.Name]+addedCPU[g.Name]+c > q.MilliValue() {
						continue
					}
					t.Errorf("iter %d: pod %s left pending (%s) though a new %s/%s would hold it", iter, pod.Name, u.Message, g.Name, it)
					fail = true
				}
			}
		}
		if fail {
			t.Logf("plan %v", summary(plan))
			for _, nn := range plan.NewNodes {
				t.Logf("  %s %s %s", nn.NodeGroup, nn.InstanceType, nn.Reason)
			}
			if t.Failed() {
				return
			}
		}
	}
}
