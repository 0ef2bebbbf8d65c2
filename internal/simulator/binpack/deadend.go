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
// pod ahead: a node (existing, planned or new) after which no node and no
// template would take one more pod of the class is passed over while
// another takes the pod; when every one would, the pod goes where it
// would have gone. The moves that improve the plan afterwards (holds)
// and the exact search keep no plan that leaves a class with nowhere to
// go where the greedy plan did not.

// aheadTries bounds the nodes of free room one pod passes over before it
// gives up looking ahead.
const aheadTries = 16

// hardSpreads reports whether a class has two DoNotSchedule spreads or
// more (over two keys, or over one key with two selectors: each may
// want another domain).
func hardSpreads(c *snapshot.Class) bool { return len(c.Spread) >= 2 }

// placeAhead is place for a class with hardSpreads (see above). It reports
// false when the pod fits nowhere.
func (p *packer) placeAhead(pod *snapshot.Pod) bool {
	c := pod.Class
	unusable, cursor := p.unusable[c.ID].clone(), p.cursor[c.ID]
	restore := func() { p.unusable[c.ID], p.cursor[c.ID] = unusable, cursor }
	var firstGrow *snapshot.Node
	for range aheadTries {
		fit, grow := p.scanNodes(c)
		if firstGrow == nil {
			firstGrow = grow
		}
		if fit == nil {
			break
		}
		if !p.deadEndsOn(pod, fit, nil) {
			restore()
			p.add(pod, fit)
			return true
		}
		i := slices.Index(p.s.Nodes, fit)
		p.unusable[c.ID] = p.unusable[c.ID].mark(i) // passed over for this pod only: restore
	}
	restore()
	if firstGrow != nil && p.growthRate(firstGrow, c) <= p.newNodeRate(c) && !p.deadEndsOn(pod, firstGrow, nil) {
		p.add(pod, firstGrow)
		return true
	}
	skip := map[*Template]bool{}
	for {
		t, opts := p.chooseTemplateExcept(c, skip)
		if t == nil {
			break
		}
		if !p.deadEndsOn(pod, nil, func() *snapshot.Node { return p.plannedNode(t, opts, 1) }) {
			p.add(pod, p.open(t, opts).Node)
			return true
		}
		skip[t] = true
	}
	// Every choice leads there: the pod goes where it would have.
	return p.placeFirst(pod)
}

// deadEndsOn reports whether, with pod on node n (or, for n nil, on a new
// node made by planned), no node and no template would take one more pod
// of its class. The snapshot is left as it was.
func (p *packer) deadEndsOn(pod *snapshot.Pod, n *snapshot.Node, planned func() *snapshot.Node) bool {
	dead := false
	_ = p.s.WithFork(func() (bool, error) {
		if n == nil {
			n = planned()
			p.s.AddNode(n)
		}
		p.s.AddPod(pod, n)
		dead = !p.nextFits(pod.Class)
		return false, nil
	})
	return dead
}

// nextFits reports whether a pod of class c fits on a template that may
// launch or on a node (existing, or planned and still in the plan, as it
// is or grown).
func (p *packer) nextFits(c *snapshot.Class) bool {
	for _, t := range p.in.Templates {
		if p.s.TemplateAvailable(t.Node) {
			if _, st := p.fit(c, t); !st.Failed() {
				return true
			}
		}
	}
	for i := 0; i < len(p.s.Nodes); i++ {
		if p.rooms && i%snapshot.RoomBlock == 0 {
			if next := p.s.RoomFrom(i, &c.Base); next > i {
				i = next - 1
				continue
			}
		}
		n := p.s.Nodes[i]
		if n.Planned && n.Unschedulable {
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
		if !p.nextFits(c) {
			if out == nil {
				out = map[*snapshot.Class]bool{}
			}
			out[c] = true
		}
	}
	return out
}
