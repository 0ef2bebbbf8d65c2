package scaledown_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// BenchmarkScaleDownDuringABurst plans a scale-down round of 1,000 (and
// 5,000) full 16-cpu nodes (32 pods of 500m each, 0.80/h) while pods of 1 cpu wait
// for a node: no node can be removed, so the replacement of the 3 least
// utilised nodes by one node of 48 cpu (1.30/h) is planned, with the pods
// that wait, then of 2 and 1. Reports the replacements planned (1 without
// waiting pods, 0 while pods wait that would take the new node's room).
func BenchmarkScaleDownDuringABurst(b_ *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, waiting := range []int{0, 500} {
			b_.Run(fmt.Sprintf("nodes=%d/waiting=%d", n, waiting), func(bb *testing.B) { benchmarkBurst(bb, n, waiting) })
		}
	}
}

func benchmarkBurst(bb *testing.B, n, waiting int) {
	all := intstr.FromString("100%")
	ng := b.NodeGroup("bench", b.Size(0, 10000))
	ng.UID = "uid-bench"
	ng.Spec.Disruption.Budget = &all
	ng.Spec.InstanceTypes = nil
	b.InstanceType("m-16", "16", "64Gi", b.OnDemand("zone-a", "0.80"))(ng)
	b.InstanceType("m-48", "48", "192Gi", b.OnDemand("zone-a", "1.30"))(ng)
	// The nodes alone pass the default cluster limits.
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng},
		Limits: scaleup.Limits{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100k"), corev1.ResourceMemory: resource.MustParse("1000Ti")}}}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		in.Nodes = append(in.Nodes, b.Node(name, "16", "64Gi", b.LaunchedBy(ng),
			b.NodeLabels(v1alpha1.LabelInstanceType, "m-16", v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")))
		for j := range 32 {
			p := b.Pod(fmt.Sprintf("p-%d-%d", i, j), b.NodeName(name), b.CPU("500m"), b.Memory("256Mi"),
				b.OwnedBy("ReplicaSet", fmt.Sprintf("rs-%d", j)), b.Phase(corev1.PodRunning))
			p.ResourceVersion = "1"
			in.Pods = append(in.Pods, p)
		}
	}
	for i := range waiting {
		in.Pending = append(in.Pending, b.Pod(fmt.Sprintf("w-%d", i), b.CPU("1"), b.Memory("1Gi"), b.OwnedBy("ReplicaSet", "burst")))
	}
	in.Base, in.WhatIf = snapshot.NewBase(), snapshot.NewBase()
	var plan *scaledown.Plan
	for bb.Loop() {
		var err error
		if plan, err = scaledown.Run(in); err != nil {
			bb.Fatal(err)
		}
	}
	bb.ReportMetric(float64(len(plan.Replace)), "replacements")
}
