package scaleup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	bld "github.com/berth-dev/berth/internal/testing/builders"
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

// BenchmarkPlanOnCluster plans 500 pending pods of the mixed workload on a
// cluster of N existing 16-cpu nodes with 30 bound pods each (issue #29's
// measure: a round should cost what the pending pods cost, not the
// cluster's size; nodes=0 is the baseline of the same run).
func BenchmarkPlanOnCluster(b *testing.B) {
	ng := workload.NodeGroup(400)
	pending := workload.Pods(500, 42)
	for _, n := range []int{0, 1000, 5000} {
		in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending, ClusterLimits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}
		for i := range n {
			name := fmt.Sprintf("node-%05d", i)
			in.Nodes = append(in.Nodes, bld.Node(name, "16", "64Gi", bld.LaunchedBy(ng), bld.NodeLabels(v1alpha1.LabelNodeGroup, ng.Name)))
			for j := range 30 {
				in.Pods = append(in.Pods, bld.Pod(fmt.Sprintf("p-%d-%d", i, j), bld.NodeName(name), bld.CPU("450m"), bld.Memory("1Gi"),
					bld.OwnedBy("ReplicaSet", fmt.Sprintf("rs-%d", j)), bld.Phase(corev1.PodRunning)))
			}
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := scaleup.Run(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
