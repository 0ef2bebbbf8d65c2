package scaledown_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// BenchmarkScaleDown plans a scale-down of N 16-cpu nodes with 30 pods
// each: half the nodes are lightly used (30 x 100m), half heavily (30 x
// 450m), so that the light ones can empty into each other and the heavy
// ones cannot move. Budget 100 %: every node is simulated. Reports the
// nodes the plan removes.
func BenchmarkScaleDown(b_ *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b_.Run(fmt.Sprintf("nodes=%d", n), func(bb *testing.B) { benchmarkScaleDown(bb, n, 0, false) })
	}
}

// BenchmarkScaleDownWithABudget is BenchmarkScaleDown at 5,000 nodes
// with the default budget (10 %): the light nodes past the budget are
// held back, and each is simulated still (its countdown runs only while
// its pods would have a home).
func BenchmarkScaleDownWithABudget(b_ *testing.B) {
	b_.Run("nodes=5000/budget=10%", func(bb *testing.B) { benchmarkScaleDownBudget(bb, 5000, "10%") })
}

// BenchmarkScaleDownFirstRound is a controller's first round at 1,000
// nodes: the model of the cluster is built, then planned on.
func BenchmarkScaleDownFirstRound(b_ *testing.B) {
	b_.Run("nodes=1000", func(bb *testing.B) { benchmarkScaleDown(bb, 1000, 0, true) })
}

// BenchmarkScaleDownWithPDBs is BenchmarkScaleDown at 1,000 nodes with
// the pods spread over 100 namespaces, each with a PodDisruptionBudget
// per workload (3,000 in all, each allowing every disruption), as a
// large multi-team cluster has them.
func BenchmarkScaleDownWithPDBs(b_ *testing.B) {
	b_.Run("nodes=1000/pdbs=3000", func(bb *testing.B) { benchmarkScaleDown(bb, 1000, 100, false) })
}

// benchmarkScaleDown plans n nodes of 30 pods, in the default namespace,
// or spread over namespaces with a PDB per workload in each; with
// firstRound, on a model of the cluster built anew every round.
func benchmarkScaleDown(bb *testing.B, n, namespaces int, firstRound bool) {
	benchmarkScaleDownIn(bb, n, namespaces, firstRound, "100%")
}

func benchmarkScaleDownBudget(bb *testing.B, n int, budget string) {
	benchmarkScaleDownIn(bb, n, 0, false, budget)
}

func benchmarkScaleDownIn(bb *testing.B, n, namespaces int, firstRound bool, budget string) {
	all := intstr.FromString(budget)
	ng := b.NodeGroup("bench", b.Size(0, 10000))
	ng.UID = "uid-bench"
	ng.Spec.Disruption.Budget = &all
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}}
	for ns := range namespaces {
		for j := range 30 {
			in.PDBs = append(in.PDBs, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rs-%d", j), Namespace: fmt.Sprintf("ns-%d", ns)},
				Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("rs-%d", j)}}},
				Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1 << 30}})
		}
	}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		in.Nodes = append(in.Nodes, b.Node(name, "16", "64Gi", b.LaunchedBy(ng)))
		cpu := "100m"
		if i%2 == 1 {
			cpu = "450m"
		}
		for j := range 30 {
			p := b.Pod(fmt.Sprintf("p-%d-%d", i, j), b.NodeName(name), b.CPU(cpu), b.Memory("256Mi"),
				b.OwnedBy("ReplicaSet", fmt.Sprintf("rs-%d", j)), b.Phase(corev1.PodRunning))
			if namespaces > 0 {
				p.Namespace = fmt.Sprintf("ns-%d", i%namespaces)
				p.Labels = map[string]string{"app": fmt.Sprintf("rs-%d", j), "tier": "backend"}
			}
			p.ResourceVersion = "1" // as read from the API server
			in.Pods = append(in.Pods, p)
		}
	}
	// As the controller plans: the same pods round after round,
	// on the model of the cluster kept from the last round.
	in.Base = snapshot.NewBase()
	var plan *scaledown.Plan
	for bb.Loop() {
		var err error
		if firstRound {
			in.Base = snapshot.NewBase()
		}
		if plan, err = scaledown.Run(in); err != nil {
			bb.Fatal(err)
		}
	}
	bb.ReportMetric(float64(len(plan.Remove)), "removed")
}
