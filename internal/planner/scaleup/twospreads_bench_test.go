package scaleup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// BenchmarkPlanTwoSpreads plans N pending pods of 100m with a zone and a
// capacity-type DoNotSchedule spread, from zero, in a group whose third
// zone offers on-demand only (twoSpreadsGroup): every pod is placed
// looking one pod ahead (deadend.go). It reports the pods left
// unschedulable and the plan's price (at 100m a pod, half of them spot
// and half on-demand, the requests alone cost N x 0.0065 an hour: a
// lower bound).
func BenchmarkPlanTwoSpreads(bb *testing.B) {
	for _, n := range []int{100, 1000} {
		bb.Run(fmt.Sprintf("pods=%d", n), func(bb *testing.B) {
			in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{twoSpreadsGroup()}, Pending: twoSpreadPods("p", n, "100m")}
			var plan *scaleup.Plan
			for bb.Loop() {
				var err error
				if plan, err = scaleup.Run(in); err != nil {
					bb.Fatal(err)
				}
			}
			bb.ReportMetric(float64(len(plan.Unschedulable)), "unschedulable")
			bb.ReportMetric(float64(len(plan.NewNodes)), "nodes")
			bb.ReportMetric(plan.PricePerHour, "price/h")
		})
	}
}

// twoSpreadsGroup offers spot in zone-1 and zone-2 and on-demand in all
// three zones (Karpenter's test offerings), as 1-cpu and 4-cpu types.
func twoSpreadsGroup() *v1alpha1.NodeGroup {
	return b.NodeGroup("g", b.Size(0, 1000),
		b.InstanceType("m-1", "1", "4Gi", b.Spot("zone-1", "0.03"), b.Spot("zone-2", "0.03"),
			b.OnDemand("zone-1", "0.10"), b.OnDemand("zone-2", "0.10"), b.OnDemand("zone-3", "0.10")),
		b.InstanceType("m-4", "4", "16Gi", b.Spot("zone-1", "0.12"), b.Spot("zone-2", "0.12"),
			b.OnDemand("zone-1", "0.40"), b.OnDemand("zone-2", "0.40"), b.OnDemand("zone-3", "0.40")))
}

// twoSpreadPods are n pods prefix-1.. of cpu with app=s and a zone and a
// capacity-type DoNotSchedule spread of skew 1 over app=s.
func twoSpreadPods(prefix string, n int, cpu string) []*corev1.Pod {
	return replicas(prefix, n, b.CPU(cpu), b.Labels("app", "s"),
		b.Spread(v1alpha1.LabelCapacityType, 1, "app", "s"), b.Spread(v1alpha1.LabelZone, 1, "app", "s"))
}
