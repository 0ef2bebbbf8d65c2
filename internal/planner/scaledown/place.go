package scaledown

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// homes are the nodes pods may move to: existing and launching nodes
// (templates and planned nodes are not in the cluster snapshot), not
// standby nodes (suspended, or booting to be: no pod moves there, even
// one that tolerates every taint), not nodes being deleted (by anyone),
// and not the nodes of a node group being
// deleted with deletionPolicy Drain (going, even when their own pods have
// no home and the plan leaves them there). The fullest come first, by name among
// equals: candidates are tried emptiest first, so a pod placed on a full
// node is seldom moved again by a later removal, and a plan moves each pod
// about once instead of several times.
func homes(s *snapshot.Snapshot, groups map[string]*v1alpha1.NodeGroup) []*snapshot.Node {
	out := slices.DeleteFunc(slices.Clone(s.Nodes), func(n *snapshot.Node) bool {
		g := groups[n.NodeGroup]
		return nodeutil.Standby(n.Node) || n.DeletionTimestamp != nil || (g != nil && retiring(g))
	})
	slices.SortFunc(out, func(a, b *snapshot.Node) int {
		if c := cmp.Compare(utilization(b), utilization(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// firstFit returns the first node, from index *hint on and wrapping
// around, where every filter passes, or nil; it moves *hint there. Starting
// where the last pod went keeps a scan short while nodes fill up one after
// another; a cheap check of free resources and pod slots skips full nodes
// before the filters (which explain each failure) run.
func firstFit(s *snapshot.Snapshot, c *snapshot.Class, nodes []*snapshot.Node, hint *int) *snapshot.Node {
	filters := predicates.Default()
	for k := range nodes {
		i := (*hint + k) % len(nodes)
		n := nodes[i]
		if n.Unschedulable || len(n.Pods) >= n.AllowedPods || !snapshot.Fits(&c.Requests, &n.Requested, &n.Allocatable) {
			continue
		}
		if !predicates.Run(filters, s, c, n).Failed() {
			*hint = i
			return n
		}
	}
	return nil
}

// placeVirtual puts the headroom units and buffer chunks that fit on the
// nodes there, as bound pods: a removal must find them a home too. Units
// that fit nowhere need new nodes (scale-up's matter) and are left out.
func placeVirtual(s *snapshot.Snapshot, groups map[string]*v1alpha1.NodeGroup, virtual []*corev1.Pod) {
	nodes := homes(s, groups)
	hint := 0
	for _, v := range virtual {
		c, err := s.Classify(v)
		if err != nil {
			continue
		}
		s.Prepare(c)
		if n := firstFit(s, c, nodes, &hint); n != nil {
			s.AddPod(&snapshot.Pod{Pod: v, Class: c}, n)
		}
	}
}

// utilization is the larger of the cpu and memory requested over
// allocatable, DaemonSet pods included: how full kube-scheduler finds the
// node.
func utilization(n *snapshot.Node) float64 {
	return share(n, n.Requested.MilliCPU, n.Requested.Memory)
}

// share is the larger of cpu and memory over the node's allocatable.
func share(n *snapshot.Node, milliCPU, memory int64) float64 {
	u := 0.0
	if a := n.Allocatable.MilliCPU; a > 0 {
		u = float64(milliCPU) / float64(a)
	}
	if a := n.Allocatable.Memory; a > 0 {
		u = max(u, float64(memory)/float64(a))
	}
	return u
}

// candidateUtilization is a candidate's utilization as Cluster Autoscaler
// computes it: without the pods terminating past their grace period
// (they are going; kube-scheduler still counts them until they are gone).
func candidateUtilization(n *snapshot.Node, now time.Time) float64 {
	cpu, mem := n.Requested.MilliCPU, n.Requested.Memory
	for _, sp := range n.Pods {
		if podutil.IsLongTerminating(sp.Pod, now) {
			cpu -= sp.Class.Requests.MilliCPU
			mem -= sp.Class.Requests.Memory
		}
	}
	return share(n, cpu, mem)
}
