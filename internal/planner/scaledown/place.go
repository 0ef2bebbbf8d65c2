package scaledown

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// homes are the nodes pods may move to: existing and launching nodes, by
// name (templates and planned nodes are not in the cluster snapshot).
func homes(s *snapshot.Snapshot) []*snapshot.Node {
	out := slices.Clone(s.Nodes)
	slices.SortFunc(out, func(a, b *snapshot.Node) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// firstFit returns the first node where every filter passes, or nil.
func firstFit(s *snapshot.Snapshot, c *snapshot.Class, nodes []*snapshot.Node) *snapshot.Node {
	filters := predicates.Default()
	for _, n := range nodes {
		if !predicates.Run(filters, s, c, n).Failed() {
			return n
		}
	}
	return nil
}

// placeVirtual puts the headroom units and buffer chunks that fit on the
// nodes there, as bound pods: a removal must find them a home too. Units
// that fit nowhere need new nodes (scale-up's matter) and are left out.
func placeVirtual(s *snapshot.Snapshot, virtual []*corev1.Pod) {
	nodes := homes(s)
	for _, v := range virtual {
		c, err := s.Classify(v)
		if err != nil {
			continue
		}
		s.Prepare(c)
		if n := firstFit(s, c, nodes); n != nil {
			s.AddPod(&snapshot.Pod{Pod: v, Class: c}, n)
		}
	}
}

// utilization is the larger of the cpu and memory requested over
// allocatable, DaemonSet pods included, as Cluster Autoscaler computes it.
func utilization(n *snapshot.Node) float64 {
	u := 0.0
	if a := n.Allocatable.MilliCPU; a > 0 {
		u = float64(n.Requested.MilliCPU) / float64(a)
	}
	if a := n.Allocatable.Memory; a > 0 {
		u = max(u, float64(n.Requested.Memory)/float64(a))
	}
	return u
}
