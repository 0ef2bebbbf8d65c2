package binpack

import (
	"cmp"
	"slices"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Types come in steps (a whole cpu and the memory that goes with it, on
// the usual catalogue), and the greedy and fill passes leave most planned
// nodes part of a step above what their pods need: a node of 4 cpu whose
// pods ask 3.2 pays for 0.8 that nobody uses, most often because its
// memory is full and its cpu is not, while a neighbour is full the other
// way. stepDown moves pods from the emptier planned nodes into the room
// of others, so that room gathers on the nodes pods leave until they
// launch as smaller types, or not at all. A pod goes to a node whose type
// holds it as it is, the room tightest in what its node is full of (cpu
// or memory) first. (Also letting the recipient grow by the pod and give
// one of its own away, two moves that swap room in cpu for room in
// memory, was measured: BenchmarkPlan at 5,000 pods 1.098 times the bound
// instead of 1.099, at three times the time.) A move is fill's (fillmoves.go): the pod
// passes the filters on its new node, and every placed pod whose required
// affinity or spread counts it still fits. A pass looks at every planned
// node once, the emptiest first, and is kept when the plan costs less.

// Bounds on the work of one pod's search.
const (
	// stepDownTries bounds the recipients a pod is tried on.
	stepDownTries = 8
	// stepDownLooks bounds the recipients looked at (most hold it in one
	// resource and not the other).
	stepDownLooks = 64
)

// stepDownPasses bounds the passes; a pass that keeps nothing ends them.
const stepDownPasses = 2

// stepper is the state of the step-down passes.
type stepper struct {
	f        *filler
	nodes    []*snapshot.Node
	all      *roomIndex
	byDomain map[string]*roomIndex
}

// stepDown runs the passes (see above).
func (p *packer) stepDown() {
	nodes := p.fillNodes()
	if len(nodes) < 2 {
		return
	}
	f := newFiller(p)
	f.watch()
	st := &stepper{f: f, nodes: nodes}
	for range stepDownPasses {
		if !st.pass() {
			break
		}
	}
	p.podsRemoved()
}

// pass is one pass; it reports whether it was kept.
func (st *stepper) pass() bool {
	p := st.f.p
	before, on := plannedPrice(st.nodes), p.templatesOn()
	order := slices.Clone(st.nodes)
	slices.SortStableFunc(order, func(a, b *snapshot.Node) int { return cmp.Compare(level(a), level(b)) })
	st.all, st.byDomain = newRoomIndex(st.nodes), map[string]*roomIndex{}
	kept := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, a := range order {
			st.empty(a)
		}
		if p.templatesChanged(on) {
			return false, nil
		}
		after := plannedPrice(st.nodes)
		kept = after < before*(1-fillMinGain)
		return kept, nil
	})
	return kept
}

// empty gives away what it can of a's pods, the largest first, and then
// launches a as the cheapest type its pods left fit (or retires it).
func (st *stepper) empty(a *snapshot.Node) {
	p := st.f.p
	if a.Unschedulable || len(a.Pods) == 0 || a.Current == nil {
		return
	}
	pods := slices.Clone(a.Pods)
	slices.SortStableFunc(pods, func(x, y *snapshot.Pod) int {
		return cmp.Or(cmp.Compare(y.Class.Requests.MilliCPU, x.Class.Requests.MilliCPU), cmp.Compare(y.Class.Requests.Memory, x.Class.Requests.Memory))
	})
	gave := false
	for _, q := range pods {
		if movable(q.Class) && st.giveAway(q, a) {
			gave = true
		}
	}
	switch {
	case !gave:
	case len(a.Pods) == 0:
		p.retire(a)
	default:
		p.s.Widen(a, p.byNode[a].Template.Node.Flex.Options)
	}
}

// movable: fill's rule (fillBuckets) for the pods it may move.
func movable(c *snapshot.Class) bool {
	return len(c.Claims) == 0 && c.ShareKey == "" && !c.NamesNodes && len(c.Requests.Scalar) == 0 && !c.HasPreferences()
}

// index is the room index of the nodes q may move to from a: all, or
// those of a's domains when a watcher counts q by a key wider than a
// node.
func (st *stepper) index(q *snapshot.Pod, a *snapshot.Node) *roomIndex {
	if !st.f.wide(q.Class) {
		return st.all
	}
	d := st.f.domainsOf(a)
	if st.byDomain[d] == nil {
		var in []*snapshot.Node
		for _, n := range st.nodes {
			if st.f.domainsOf(n) == d {
				in = append(in, n)
			}
		}
		st.byDomain[d] = newRoomIndex(in)
	}
	return st.byDomain[d]
}

// giveAway moves q from a to a recipient whose type holds it as it is.
// It reports whether it did.
func (st *stepper) giveAway(q *snapshot.Pod, a *snapshot.Node) bool {
	need := &q.Class.Requests
	tries := 0
	for i, b := range st.index(q, a).from(a, need) {
		if tries == stepDownTries || i == stepDownLooks {
			return false
		}
		if !st.recipient(a, b) {
			continue
		}
		if room, _ := b.Current.Free(); !snapshot.Fits(need, &b.Requested, &room) {
			continue
		}
		tries++
		if st.f.move(q, b, b.Current.Price) {
			return true
		}
	}
	return false
}

// recipient reports whether b may take pods from a.
func (st *stepper) recipient(a, b *snapshot.Node) bool {
	p := st.f.p
	return b != a && !b.Unschedulable && b.Current != nil && len(b.Pods) > 0 &&
		(p.oneWeight || p.byNode[a].Template.Weight <= p.byNode[b].Template.Weight) // a group's weight outranks price
}

// level is how full n's current type is: the larger share of its room
// (allocatable less the DaemonSets') in cpu or memory its pods use.
func level(n *snapshot.Node) float64 {
	cpu, mem := shares(n)
	return max(cpu, mem)
}

// shares are the shares of its current type's room (allocatable less
// the DaemonSets') in cpu and in memory that n's pods ask for.
func shares(n *snapshot.Node) (cpu, mem float64) {
	room, _ := n.Current.Free()
	return share(n.Requested.MilliCPU, room.MilliCPU), share(n.Requested.Memory, room.Memory)
}

// roomIndex lists planned nodes by free cpu and by free memory (as they
// were when it was made: a try reads the node's room again).
type roomIndex struct {
	byCPU, byMem     []*snapshot.Node
	freeCPU, freeMem []int64
}

func newRoomIndex(nodes []*snapshot.Node) *roomIndex {
	ix := &roomIndex{byCPU: slices.Clone(nodes), byMem: slices.Clone(nodes)}
	slices.SortStableFunc(ix.byCPU, func(a, b *snapshot.Node) int { return cmp.Compare(freeOf(a).MilliCPU, freeOf(b).MilliCPU) })
	slices.SortStableFunc(ix.byMem, func(a, b *snapshot.Node) int { return cmp.Compare(freeOf(a).Memory, freeOf(b).Memory) })
	ix.freeCPU, ix.freeMem = make([]int64, len(nodes)), make([]int64, len(nodes))
	for i := range nodes {
		ix.freeCPU[i], ix.freeMem[i] = freeOf(ix.byCPU[i]).MilliCPU, freeOf(ix.byMem[i]).Memory
	}
	return ix
}

// from returns the nodes whose free room of the resource a binds on
// (memory when its pods use a larger share of it than of cpu) holds
// need, the tightest first.
func (ix *roomIndex) from(a *snapshot.Node, need *snapshot.Resources) []*snapshot.Node {
	room, _ := a.Current.Free()
	if share(a.Requested.Memory, room.Memory) > share(a.Requested.MilliCPU, room.MilliCPU) {
		i, _ := slices.BinarySearch(ix.freeMem, need.Memory)
		return ix.byMem[i:]
	}
	i, _ := slices.BinarySearch(ix.freeCPU, need.MilliCPU)
	return ix.byCPU[i:]
}

// freeOf is what n's current type leaves free of its pods' requests.
func freeOf(n *snapshot.Node) snapshot.Resources {
	free, _ := n.Current.Free()
	free = free.Clone()
	free.Sub(&n.Requested)
	return free
}
