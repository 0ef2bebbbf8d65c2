package scaleup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
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

// BenchmarkPlanTwoSpreadsOnCluster plans 500 pending pods of 100m with a
// zone and a hostname spread, pinned to group g, on 5,000 existing nodes
// of 16 cpu: g's 500 are booting (where berth looks ahead) and at g's
// maxSize, so no new node may come and each look ahead scans the
// nodes; the others, Ready, are of another group.
func BenchmarkPlanTwoSpreadsOnCluster(bb *testing.B) {
	g := b.NodeGroup("g", b.Size(0, 500), b.InstanceType("m-16", "16", "64Gi", b.OnDemand("zone-1", "0.80"), b.OnDemand("zone-2", "0.80"), b.OnDemand("zone-3", "0.80")))
	other := b.NodeGroup("other", b.Size(0, 5000), b.InstanceType("m-16", "16", "64Gi", b.OnDemand("zone-1", "0.80")))
	in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{g, other}, Limits: scaleup.Limits{Resources: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1000000"), corev1.ResourceMemory: resource.MustParse("1000000Gi")}}}
	for i := range 5000 {
		ng, zone, node := other, "zone-1", func(n *corev1.Node) *corev1.Node { return n }
		if i%10 == 0 {
			ng, zone, node = g, fmt.Sprintf("zone-%d", 1+i/10%3), booting
		}
		name := fmt.Sprintf("node-%05d", i)
		in.Nodes = append(in.Nodes, node(groupNode(name, ng, "m-16", zone, v1alpha1.CapacityTypeOnDemand)))
		p := b.Pod("bound-"+name, b.CPU("8"), b.NodeName(name), b.Phase(corev1.PodRunning))
		p.ResourceVersion = "1"
		in.Pods = append(in.Pods, p)
	}
	in.Pending = replicas("w", 500, b.CPU("100m"), b.Labels("app", "s"), b.NodeSelector(v1alpha1.LabelNodeGroup, "g"),
		b.Spread(v1alpha1.LabelZone, 1, "app", "s"), b.Spread(corev1.LabelHostname, 1, "app", "s"))
	in.Base = snapshot.NewBase()
	var plan *scaleup.Plan
	seq := uint64(0)
	for bb.Loop() {
		in.Changes = &snapshot.PodChanges{From: seq, To: seq + 1}
		seq++
		var err error
		if plan, err = scaleup.Run(in); err != nil {
			bb.Fatal(err)
		}
	}
	bb.ReportMetric(float64(len(plan.Unschedulable)), "unschedulable")
	bb.ReportMetric(float64(len(plan.NewNodes)), "nodes")
}
