package binpack

import (
	"slices"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// A pod with two DoNotSchedule spreads must go to a domain of each that
// holds the fewest of the pods it counts (give or take the skew), and the
// two domains must meet on a node: a zone spread and a
// capacity-type spread where one zone offers on-demand only can reach
// counts where the next pod must go to that zone and must be spot, which
// nothing offers. Pods of such a class are therefore placed looking one
// pod ahead on the nodes where berth's nomination decides (booting,
// planned or new; on a Ready node kube-scheduler binds the pod whatever
// berth plans): such a node after which no node and no template would
// take one more pod of the class is passed over while another takes the
// pod; when every one would, the pod goes where it would have gone. The
// moves that improve the plan afterwards (holds) and the exact search
// keep no plan that leaves a class with nowhere to go where the greedy
// plan did not, and a packing that looked ahead and left pods out gives
// way to one that did not if it leaves fewer out (pack).

// aheadTries bounds the nodes of free room one pod passes over before it
// gives up looking ahead.
const aheadTries = 16

// hardSpreads reports whether a class has two DoNotSchedule spreads or
// more (over two keys, or over one key with two selectors: each may
// want another domain).
func hardSpreads(c *snapshot.Class) bool { return len(c.Spread) >= 2 }

// placeAhead is place for a class with hardSpreads (see above): a fit on
// a node kube-scheduler may bind pods to now is taken as it is (the
// scheduler binds the pod there, whatever berth plans), one on a node
// still booting, planned this round or new (where berth's nomination
// decides) only if one more pod of the class would still fit somewhere.
// It reports false when the pod fits nowhere.
func (p *packer) placeAhead(pod *snapshot.Pod) bool {
	c := pod.Class
	defer func() { p.passed = p.passed[:0] }()
	var firstGrow *snapshot.Node
	for range aheadTries {
		fit, grow := p.scanNodes(c)
		if firstGrow == nil {
			firstGrow = grow
		}
		if fit == nil {
			break
		}
		at := p.fitAt
		if schedulerDecides(fit) || !p.deadEndsOn(pod, fit, at, nil) {
			p.add(pod, fit)
			return true
		}
		p.passed, p.passedOver = p.passed.mark(at), true
	}
	if firstGrow != nil && p.growthRate(firstGrow, c) <= p.newNodeRate(c) && !p.deadEndsOn(pod, firstGrow, p.cursor[c.ID], nil) {
		p.add(pod, firstGrow)
		return true
	}
	skip := map[*Template]bool{}
	for {
		t, opts := p.chooseTemplateExcept(c, skip)
		if t == nil {
			break
		}
		if !p.deadEndsOn(pod, nil, len(p.s.Nodes), func() *snapshot.Node { return p.plannedNode(t, opts, 1) }) {
			p.add(pod, p.open(t, opts).Node)
			return true
		}
		skip[t], p.passedOver = true, true
	}
	// Every choice leads there: the pod goes where it would have.
	p.passed = p.passed[:0]
	return p.placeFirst(pod)
}

// schedulerDecides reports whether kube-scheduler may bind pods to node n
// now: an existing node that does not wait (snapshot.Node.Waits).
func schedulerDecides(n *snapshot.Node) bool {
	return !n.Planned && !n.Waits
}

// deadEndsOn reports whether, with pod on node n (or, for n nil, on a new
// node made by planned), no node and no template would take one more pod
// of its class; from is where to look for a node first (nextFits). The
// snapshot is left as it was.
func (p *packer) deadEndsOn(pod *snapshot.Pod, n *snapshot.Node, from int, planned func() *snapshot.Node) bool {
	dead := false
	_ = p.s.WithFork(func() (bool, error) {
		if n == nil {
			n = planned()
			p.s.AddNode(n)
		}
		p.s.AddPod(pod, n)
		dead = !p.nextFits(pod.Class, from)
		return false, nil
	})
	return dead
}

// nextFits reports whether a pod of class c fits on a template that may
// launch or on a node (existing, or planned and still in the plan, as it
// is or grown). Nodes the class can never use (what scanNodes learnt:
// they stay unusable while pods are only added) are skipped. The nodes
// are looked at from index from (where the pod before went: the next one
// most often fits there or soon after) to the end, then from the class's
// cursor: the answer is the same, found sooner.
func (p *packer) nextFits(c *snapshot.Class, from int) bool {
	for _, t := range p.in.Templates {
		if p.s.TemplateAvailable(t.Node) {
			if _, st := p.fit(c, t); !st.Failed() {
				return true
			}
		}
	}
	cursor := p.cursor[c.ID]
	from = min(max(from, cursor), len(p.s.Nodes))
	return p.fitsBetween(c, from, len(p.s.Nodes)) || p.fitsBetween(c, cursor, from)
}

// fitsBetween reports whether a pod of class c fits on a node of index
// lo to hi (not included), skipping those the class can never use.
func (p *packer) fitsBetween(c *snapshot.Class, lo, hi int) bool {
	unusable, static := p.unusable[c.ID], p.static[c.ID]
	for i := lo; i < hi; i++ {
		if i%snapshot.RoomBlock == 0 {
			if shapes := p.s.BlockShapes(i); shapes != nil && static.hasAll(shapes) {
				i += snapshot.RoomBlock - 1
				continue
			}
			if p.rooms {
				if next := p.s.RoomFrom(i, &c.Base); next > i {
					i = next - 1
					continue
				}
			}
		}
		n := p.s.Nodes[i]
		if unusable.has(i) || (n.Shape != 0 && static.has(int(n.Shape))) || (n.Planned && n.Unschedulable) {
			continue
		}
		if !predicates.Run(p.in.Filters, p.s, c, n).Failed() {
			return true
		}
	}
	return false
}

// hardClasses are the classes of pods with hardSpreads, each once.
func hardClasses(pods []*snapshot.Pod) []*snapshot.Class {
	var out []*snapshot.Class
	for _, pod := range pods {
		if hardSpreads(pod.Class) && !slices.Contains(out, pod.Class) {
			out = append(out, pod.Class)
		}
	}
	return out
}

// deadEnded are the classes of p.hard one more pod of which fits nowhere.
func (p *packer) deadEnded() map[*snapshot.Class]bool {
	var out map[*snapshot.Class]bool
	for _, c := range p.hard {
		if !p.nextFits(c, 0) {
			if out == nil {
				out = map[*snapshot.Class]bool{}
			}
			out[c] = true
		}
	}
	return out
}

// pack packs pods in order on the snapshot. A run with pods of a class
// with hardSpreads that passed over a node or template and left pods out
// is compared with a run that does not look ahead, and the one that
// leaves fewer pods out is kept: room kept for a pod that may come must
// not cost a pod that waits (the nodes opened instead of those passed
// over can take a group to its maxSize).
func pack(in Input, pods []*snapshot.Pod, order podOrder, static shapeFailures) *packer {
	if len(hardClasses(pods)) == 0 {
		p := newPacker(in, static)
		p.run(pods, order)
		return p
	}
	var p *packer
	kept := false
	_ = in.Snapshot.WithFork(func() (bool, error) {
		p = newPacker(in, static)
		p.run(pods, order)
		kept = len(p.res.Unplaced) == 0 || !p.passedOver
		return kept, nil
	})
	if kept {
		return p
	}
	ahead, without := len(p.res.Unplaced), 0
	_ = in.Snapshot.WithFork(func() (bool, error) {
		q := newPacker(in, static)
		q.noAhead = true
		q.run(pods, order)
		without = len(q.res.Unplaced)
		return false, nil
	})
	p = newPacker(in, static)
	p.noAhead = without < ahead
	p.run(pods, order)
	return p
}
