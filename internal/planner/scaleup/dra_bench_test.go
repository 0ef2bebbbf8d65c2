package scaleup_test

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

const benchDriver = "gpu.example.com"

// draBenchGroup is a node group of n instance types whose nodes publish
// 1, 2, 4 or 8 devices of one model (t4, a100, h100), priced by cpu and
// devices.
func draBenchGroup(n int) *v1alpha1.NodeGroup {
	models := []string{"t4", "a100", "h100"}
	modelPrice := map[string]float64{"t4": 0.3, "a100": 2, "h100": 4}
	var opts []b.NodeGroupOption
	for i := range n {
		model := models[i%len(models)]
		devices := 1 << (i / len(models) % 4)
		cpu := 4 * (1 + i%4)
		price := 0.05*float64(cpu) + modelPrice[model]*float64(devices)
		opts = append(opts,
			b.InstanceType(fmt.Sprintf("%s-%d-c%d-%d", model, devices, cpu, i), fmt.Sprint(cpu), fmt.Sprintf("%dGi", 8*cpu),
				b.OnDemand("zone-a", fmt.Sprintf("%.3f", price))),
			b.Devices(benchDriver, "gpu", devices, map[string]string{"model": model}))
	}
	opts = append(opts, b.Size(0, 100000))
	return b.NodeGroup("gpu", opts...)
}

// draBenchPods are n pods with claims: most get one or two devices of a
// model from a template; one in five shares a claim with three others.
func draBenchPods(n int, seed int64) ([]*corev1.Pod, snapshot.DRA) {
	r := rand.New(rand.NewSource(seed))
	dra := snapshot.DRA{DeviceClasses: []*resourcev1.DeviceClass{b.DeviceClass("gpu", benchDriver)}}
	for _, model := range []string{"t4", "a100", "h100"} {
		for _, count := range []int64{1, 2} {
			dra.ClaimTemplates = append(dra.ClaimTemplates, b.ClaimTemplate(fmt.Sprintf("%d-%s", count, model),
				b.DeviceRequest("gpu", "gpu", count, fmt.Sprintf(`device.attributes[%q].model == %q`, benchDriver, model))))
		}
	}
	var pods []*corev1.Pod
	for i := range n {
		opts := []b.PodOption{b.NoUID(), b.CPU(fmt.Sprintf("%dm", 250*(1+r.Intn(4)))), b.Memory("1Gi")}
		if i%5 == 0 {
			name := fmt.Sprintf("shared-%d", i/20)
			if i%20 == 0 {
				dra.Claims = append(dra.Claims, b.Claim(name, b.DeviceRequest("gpu", "gpu", 1,
					fmt.Sprintf(`device.attributes[%q].model == "a100"`, benchDriver))))
			}
			opts = append(opts, b.PodClaim("gpu", name))
		} else {
			opts = append(opts, b.PodClaimTemplate("gpu", fmt.Sprintf("%d-%s", 1+r.Intn(2), []string{"t4", "a100", "h100"}[r.Intn(3)])))
		}
		pods = append(pods, b.Pod(fmt.Sprintf("pod-%d", i), opts...))
	}
	return pods, dra
}

// BenchmarkPlanDRA plans N pending pods with resource claims (per-pod
// templates and shared claims) against one node group of 50 instance
// types with devices, from zero nodes, and reports pods/sec next to
// BenchmarkPlan's.
func BenchmarkPlanDRA(bm *testing.B) {
	ng := draBenchGroup(50)
	for _, n := range []int{100, 1000} {
		bm.Run(fmt.Sprintf("pods=%d", n), func(bm *testing.B) {
			pods, dra := draBenchPods(n, 42)
			in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods, DRA: dra, Limits: scaleup.Limits{Resources: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}}
			var plan *scaleup.Plan
			bm.ResetTimer()
			for bm.Loop() {
				var err error
				if plan, err = scaleup.Run(in); err != nil {
					bm.Fatal(err)
				}
			}
			if len(plan.Unschedulable) > 0 {
				bm.Fatalf("%d pods unschedulable, first: %s", len(plan.Unschedulable), plan.Unschedulable[0].Message)
			}
			bm.ReportMetric(float64(n)*float64(bm.N)/bm.Elapsed().Seconds(), "pods/sec")
			bm.ReportMetric(float64(len(plan.NewNodes)), "nodes")
			bm.ReportMetric(plan.PricePerHour, "$/h")
		})
	}
}
