package scaleup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/testing/workload"
)

// BenchmarkPlan plans N pending pods of the mixed workload (plain, zone
// spread, hostname spread, zone self-affinity, hostname self-anti-affinity)
// against one node group of 400 instance types, from zero nodes. It reports
// pods/sec and the plan's price divided by a lower bound (price/lb).
func BenchmarkPlan(b *testing.B) {
	ng := workload.NodeGroup(400)
	for _, n := range []int{100, 1000, 5000, 20000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := workload.Pods(n, 42)
			// Limits as high as Karpenter's benchmark sets them.
			in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods, ClusterLimits: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}
			lb := workload.LowerBound(ng, pods)
			var plan *scaleup.Plan
			b.ResetTimer()
			for b.Loop() {
				var err error
				if plan, err = scaleup.Run(in); err != nil {
					b.Fatal(err)
				}
			}
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable, first: %s", len(plan.Unschedulable), plan.Unschedulable[0].Message)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/sec")
			b.ReportMetric(float64(len(plan.NewNodes)), "nodes")
			b.ReportMetric(plan.PricePerHour/lb, "price/lb")
		})
	}
}
