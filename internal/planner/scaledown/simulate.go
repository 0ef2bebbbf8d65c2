package scaledown

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// classify runs the drain rules on the node's pods: the pods (and headroom
// units) that must move, the real pods among them to evict, or the first
// pod that blocks.
func (p *planner) classify(n *snapshot.Node, g *v1alpha1.NodeGroup) ([]*snapshot.Pod, []*corev1.Pod, *Blocked) {
	ctx := &drain.Context{PDBs: p.budgets, Now: p.now, Controllers: p.controllers}
	movers := make([]*snapshot.Pod, 0, len(n.Pods))
	evict := make([]*corev1.Pod, 0, len(n.Pods))
	var waits *Blocked // the first pod the node waits to finish
	for _, sp := range n.Pods {
		if p.placedByPlan(sp) || movedHere(sp) {
			movers = append(movers, sp) // needs a home, is not evicted from this node
			continue
		}
		switch o := drain.Check(p.rules, sp.Pod, ctx); o.Verdict {
		case drain.Blocks:
			ref := scaleup.PodRef{Namespace: sp.Namespace, Name: sp.Name}
			b := &Blocked{Node: n.Name, NodeGroup: g.Name, Reason: o.Reason, Pod: &ref, Message: o.Message}
			if !o.Finishes {
				return nil, nil, b
			}
			if waits == nil {
				waits = b
			}
		case drain.Moves:
			movers = append(movers, sp)
			evict = append(evict, sp.Pod)
		}
	}
	if waits != nil {
		// The node waits for the pod to finish; its count runs while the
		// others have a home (consider), so they are returned too.
		waits.Waits = true
		return movers, evict, waits
	}
	return movers, evict, nil
}

// rehome cordons and taints the node (DisruptedTaint), takes the movers
// off it and places each on the
// first node (fullest first, homes) where the filters pass, largest pods
// first; a pod that finds none while its required pod affinity selects
// another mover is tried again after the others (followsAMover). It returns the moves of the pods it evicts (not of headroom units
// or settled pods), the new homes of pods an earlier removal of this plan
// moved to the node (again), or the first pod with no home. Call it in a
// fork.
func (p *planner) rehome(n *snapshot.Node, movers []*snapshot.Pod) (moves, again []Move, homeless *snapshot.Pod) {
	p.s.Cordon(n)
	p.s.Taint(n, DisruptedTaint()) // as the drain will: spreads that honor taints stop counting it
	pods := slices.Clone(movers)
	for _, sp := range pods {
		p.s.RemovePod(sp)
	}
	slices.SortStableFunc(pods, func(a, b *snapshot.Pod) int {
		return cmp.Compare(b.Class.Requests.MilliCPU+b.Class.Requests.Memory>>20, a.Class.Requests.MilliCPU+a.Class.Requests.Memory>>20)
	})
	if p.homes == nil {
		p.homes = homes(p.s, p.groups)
	}
	moves = make([]Move, 0, len(pods))
	// The pods to place in turn; a deferred pod joins its end, once.
	queue := pods
	var deferred map[*snapshot.Pod]bool
	for len(queue) > 0 {
		sp := queue[0]
		queue = queue[1:]
		unbound, c := p.unboundClass(sp)
		if c == nil {
			return nil, nil, sp
		}
		to := firstFit(p.s, c, p.homes, &p.hint)
		if to == nil && !deferred[sp] && followsAMover(sp, pods) {
			// Its required pod affinity selects a pod that moves too and may
			// not be placed yet: tried again once the others are.
			if deferred == nil {
				deferred = map[*snapshot.Pod]bool{}
			}
			deferred[sp] = true
			queue = append(queue, sp)
			continue
		}
		if to == nil {
			return nil, nil, sp
		}
		p.s.AddPod(unbound, to)
		move := Move{Pod: scaleup.PodRef{Namespace: sp.Namespace, Name: sp.Name}, To: to.Name}
		switch {
		case p.placedByPlan(sp):
			// A headroom unit or a pod settle placed: nothing to evict.
		case movedHere(sp):
			again = append(again, move)
		default:
			moves = append(moves, move)
		}
	}
	return moves, again, nil
}

// followsAMover reports whether a required pod affinity term of the pod
// selects another of the pods that move with it.
func followsAMover(sp *snapshot.Pod, movers []*snapshot.Pod) bool {
	return slices.ContainsFunc(movers, func(m *snapshot.Pod) bool {
		return m != sp && podutil.RequiredAffinitySelects(sp.Pod, m.Pod)
	})
}

// movedHere reports whether the pod is on its node because this plan moved
// it there (it was on a node removed before): it needs a home if this node
// goes too, but it is not on the node, to evict or to check.
func movedHere(sp *snapshot.Pod) bool { return sp.Unbound || sp.Spec.NodeName == "" }
