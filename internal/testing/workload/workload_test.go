package workload_test

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"

	. "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/workload"
)

// perCPU is what a cpu of capacity costs in the catalogue, worked out by
// hand: 0.1 per cpu plus 0.1 per GB of the 2 GiB (2.147483648 GB) each
// cpu comes with.
const perCPU = 0.1 + 0.1*2.147483648

func pods(n int, opts ...PodOption) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, Pod(fmt.Sprintf("p%d", i), opts...))
	}
	return out
}

// TestLowerBoundCountsTheReserveOfTheNodesAPlanNeeds checks the bound
// against figures worked out by hand, and against the cheapest plan where
// it is easy to see: a bound above it would call a plan better than the
// best one.
func TestLowerBoundCountsTheReserveOfTheNodesAPlanNeeds(t *testing.T) {
	anti := []PodOption{CPU("1"), Memory("1Gi"), Labels("app", "web"), PodAntiAffinity(AffinityTerm(corev1.LabelHostname, "app", "web"))}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		// want: the bound, by hand; cheapest: the cheapest plan, by hand.
		want, cheapest float64
	}{{
		// One node of 11 cpu (10.9 allocatable) is the cheapest; any plan
		// buys the 10 cpu asked plus at least one node's 100m.
		name: "ten pods that may share a node", pods: pods(10, CPU("1"), Memory("1Gi")),
		want: perCPU * 10.1, cheapest: perCPU * 11,
	}, {
		// Three nodes of 2 cpu: each of the three buys its 100m.
		name: "three pods that may not share a node", pods: pods(3, anti...),
		want: perCPU * 3.3, cheapest: perCPU * 6,
	}, {
		// Memory asks for more than cpu: 10 x 3Gi on one node of 16 cpu
		// (32Gi - 10Mi); the bound buys 30Gi + 10Mi of 2Gi-per-cpu capacity.
		name: "memory decides", pods: pods(10, CPU("100m"), Memory("3Gi")),
		want: perCPU * (30 + 10.0/1024) / 2, cheapest: perCPU * 16,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := workload.LowerBound(workload.NodeGroup(40), tc.pods)
			if math.Abs(got-tc.want) > 1e-5*tc.want { // prices are written to 6 decimals
				t.Errorf("lower bound %.6f, want %.6f", got, tc.want)
			}
			if got > tc.cheapest {
				t.Errorf("lower bound %.6f above the cheapest plan %.6f", got, tc.cheapest)
			}
			if old := workload.RequestsLowerBound(workload.NodeGroup(40), tc.pods); old > got {
				t.Errorf("the bound of requests alone %.6f is above %.6f", old, got)
			}
		})
	}
}

// TestMinNodesCountsTheLargestSetThatMayNotShareANode: only pods that
// carry a hostname anti-affinity term matching their own labels exclude
// each other, and only within their namespace.
func TestMinNodesCountsTheLargestSetThatMayNotShareANode(t *testing.T) {
	web := PodAntiAffinity(AffinityTerm(corev1.LabelHostname, "app", "web"))
	var mix []*corev1.Pod
	mix = append(mix, pods(4, Labels("app", "web"), web)...)
	mix = append(mix, pods(2, Labels("app", "web"), web, Namespace("other"))...)
	mix = append(mix, pods(5, Labels("app", "db"), web)...) // excludes web pods, not each other
	mix = append(mix, pods(6, Labels("app", "zone"), PodAntiAffinity(AffinityTerm(corev1.LabelTopologyZone, "app", "zone")))...)
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want int
	}{
		{"no pods", nil, 0},
		{"pods without anti-affinity", pods(3), 1},
		{"the largest set of one namespace", mix, 4},
		{"a pod that carries its term twice counts once", pods(3, Labels("app", "web"), web, web), 3},
	} {
		if got := workload.MinNodes(tc.pods); got != tc.want {
			t.Errorf("%s: %d nodes, want %d", tc.name, got, tc.want)
		}
	}
}
