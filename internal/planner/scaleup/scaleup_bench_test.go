package scaleup_test

import (
	"flag"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	bld "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/workload"
)

// BenchmarkPlan plans N pending pods of the mixed workload (plain, zone
// spread, hostname spread, zone self-affinity, hostname self-anti-affinity)
// against one node group of 400 instance types, from zero nodes. It reports
// pods/sec and the plan's price divided by a lower bound (price/lb:
// workload.LowerBound; price/lb-req: the bound of requests alone, that of
// measurements before 2026-11-28).
func BenchmarkPlan(b *testing.B) {
	ng := workload.NodeGroup(400)
	// As read from the API server: the provisioner keeps its options
	// from round to round (scaleup.Options), built by the first round.
	ng.UID, ng.Generation = "uid-bench", 1
	for _, n := range []int{100, 1000, 5000, 20000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := workload.Pods(n, 42)
			// Limits as high as Karpenter's benchmark sets them.
			in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods, Limits: scaleup.Limits{Resources: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}},
				Options: scaleup.NewOptions()}
			lb, lbReq := workload.LowerBound(ng, pods), workload.RequestsLowerBound(ng, pods)
			if *fresh {
				in.Options = nil
			} else if _, err := scaleup.Run(in); err != nil { // the first round, which builds the options
				b.Fatal(err)
			}
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
			b.ReportMetric(plan.PricePerHour/lbReq, "price/lb-req")
		})
	}
}

// fresh makes BenchmarkPlan build the options every round, as a first
// round does (-fresh).
var fresh = flag.Bool("fresh", false, "BenchmarkPlan builds the node groups' options every round (no scaleup.Options)")

// BenchmarkPlanOnCluster plans 500 pending pods of the mixed workload on a
// cluster of N existing 16-cpu nodes with 30 bound pods each (issue #29's
// measure: a round should cost what the pending pods cost, not the
// cluster's size; nodes=0 is the baseline of the same run), and a round
// with nothing pending on the largest cluster. Between rounds nothing
// changes, and the round is told so as the controller's informer events
// tell it (snapshot.PodChanges); "every-pod" rounds are not told, and
// look at every pod to find what changed.
func BenchmarkPlanOnCluster(b *testing.B) {
	ng := workload.NodeGroup(400)
	for _, c := range []struct {
		pending, nodes int
		everyPod       bool
	}{{500, 0, false}, {500, 1000, false}, {500, 5000, false}, {0, 5000, false}, {500, 5000, true}} {
		in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Limits: scaleup.Limits{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}}
		if c.pending > 0 {
			in.Pending = workload.Pods(c.pending, 42)
		}
		in.Nodes, in.Pods = boundCluster(ng, c.nodes)
		// As the controller plans: the same pod objects round after
		// round (its informer cache's), on the model of the cluster kept
		// from the last round.
		in.Base = snapshot.NewBase()
		name := fmt.Sprintf("pending=%d/nodes=%d", c.pending, c.nodes)
		if c.everyPod {
			name += "/every-pod"
		}
		b.Run(name, func(b *testing.B) {
			seq := uint64(0)
			for b.Loop() {
				if !c.everyPod {
					in.Changes = &snapshot.PodChanges{From: seq, To: seq + 1}
					seq++
				}
				if _, err := scaleup.Run(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// boundCluster is n 16-cpu nodes of group ng with 30 running pods each,
// labelled with the group's type of 16 cpu (fake-it-15), as a cloud's
// nodes carry their instance type.
func boundCluster(ng *v1alpha1.NodeGroup, n int) ([]*corev1.Node, []*corev1.Pod) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		nodes = append(nodes, bld.Node(name, "16", "64Gi", bld.LaunchedBy(ng), bld.NodeLabels(v1alpha1.LabelNodeGroup, ng.Name, v1alpha1.LabelInstanceType, "fake-it-15")))
		for j := range 30 {
			p := bld.Pod(fmt.Sprintf("p-%d-%d", i, j), bld.NodeName(name), bld.CPU("450m"), bld.Memory("1Gi"),
				bld.OwnedBy("ReplicaSet", fmt.Sprintf("rs-%d", j)), bld.Phase(corev1.PodRunning))
			p.ResourceVersion = "1" // as read from the API server
			pods = append(pods, p)
		}
	}
	return nodes, pods
}
