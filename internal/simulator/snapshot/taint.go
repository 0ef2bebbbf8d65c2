package snapshot

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Taint gives an existing node one more taint, as a drain does to the
// node it empties (after Cordon): the node takes the shape of a node with
// that taint, and each topology spread whose nodeTaintsPolicy is Honor
// and whose pods do not tolerate it stops counting the node as a domain,
// and its pods, as kube-scheduler stops once the taint is on the node.
// A node that has the taint already is left as it is. Journaled.
// O(counters x pods on the node, and the nodes of its two shapes).
func (s *Snapshot) Taint(n *Node, t corev1.Taint) {
	if n.Planned || n.Template || slices.ContainsFunc(n.Taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
		return
	}
	old := n.Taints
	s.setTaints(n, append(slices.Clip(old), t))
	if s.shapes.tainted == nil {
		s.shapes.tainted = map[int32]bool{}
	}
	s.shapes.tainted[n.Shape] = true
	s.record(undo{kind: undoTaint, node: n, taints: &old})
}

// setTaints changes an existing node's taints, moves it to the shape
// they make, and brings the view of it of every spread that honors
// taints up to date (no other counter reads taints): where the node's
// eligibility changed, its domain and the pods counted there come or go.
func (s *Snapshot) setTaints(n *Node, taints []corev1.Taint) {
	honoring := s.taintBuf[:0]
	for _, k := range s.counters {
		if k.kind == kindSpread && k.owner.Spread[k.term].NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
			honoring = append(honoring, honoringCounter{k: k, was: k.eligible(n)})
		}
	}
	n.Taints = taints
	s.reshape(n)
	for _, h := range honoring {
		k := h.k
		n.setEligCache(k.ID, unknown)
		now := k.eligible(n)
		if now == h.was {
			continue
		}
		v := n.Labels()[k.key]
		counted := 0
		for _, p := range n.Pods {
			if slices.Contains(p.Class.counters, k) {
				counted++
			}
		}
		if now {
			k.addDomain(v)
			k.count(n, counted)
		} else {
			k.count(n, -counted)
			k.removeDomain(v)
		}
	}
	clear(honoring)
	s.taintBuf = honoring[:0]
}

// honoringCounter is a spread counter that honors taints, and whether it
// counted a node before its taints changed.
type honoringCounter struct {
	k   *Counter
	was bool
}

// reshape moves an existing node from its shape to the one its labels and
// taints make now, keeping each shape's list of nodes ascending, and has
// the room bound of its block work out its shapes again.
func (s *Snapshot) reshape(n *Node) {
	if n.Shape == 0 {
		return
	}
	i := int(n.pos)
	idx := s.shapes.nodes[n.Shape-1]
	if j, ok := slices.BinarySearch(idx, i); ok {
		s.shapes.nodes[n.Shape-1] = slices.Delete(idx, j, j+1)
	}
	n.Shape = s.shapeOf(n)
	idx = s.shapes.nodes[n.Shape-1]
	j, _ := slices.BinarySearch(idx, i)
	s.shapes.nodes[n.Shape-1] = slices.Insert(idx, j, i)
	// The nodes are the same: the hostnames counted stay (shapes.version).
	if k := i / RoomBlock; k < len(s.rooms.blocks) {
		s.rooms.blocks[k].loose = true
	}
}
