package binpack

import (
	"cmp"
	"math"
	"slices"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// A planned node pays for a whole type, and a type sells cpu and memory
// together (2 GiB per cpu on the usual catalogue). After fill and the
// greedy pass, some nodes are full in memory with cpu to spare and others
// the other way round; neither can launch a smaller type, and no single
// move helps: the node with cpu to spare has no memory for a pod, and
// pods that count for a zone spread may not leave their zone (fill's
// rule). balance trades pods instead: a pod heavy in what its node is
// full of for a pod of a node full in the other resource, light in it,
// so that both nodes come nearer to using all of their type and the next
// pass (stepDown, Widen) can launch them smaller.
//
// The two pods of a trade differ in their requests alone
// (Snapshot.Constraints): each may run wherever the other could, in any
// order kube-scheduler places them, and every count a selector reads
// (pod affinity, anti-affinity and spread, by any topology key) stays as
// it was, so no filter needs to run again. A trade keeps both nodes
// within their current types, and is made only when the part of their
// prices their pods use (price times the larger share of cpu or memory)
// drops. A pass is kept when the plan costs less once every traded node
// has launched as the cheapest type its pods fit (docs/performance.md has
// the figures).

// balanceLooks bounds the pods of equal constraints one pod's trade
// looks at.
const balanceLooks = 64

// balancer is the state of one balance pass.
type balancer struct {
	p *packer
	// perByte is milli-cpu per byte of memory across the planned nodes'
	// room: how much cpu a byte of memory is worth when comparing pods.
	perByte float64
	// peers lists the movable pods by their constraints (key), the
	// heaviest in cpu against memory first.
	peers map[uint64]*peerList
	// used are the pods traded in this pass; traded the nodes they were on.
	used   map[*snapshot.Pod]bool
	traded map[*snapshot.Node]bool
}

// peerList is the movable pods of one key, the heaviest in cpu against
// memory first; pods[head:tail] holds every pod not traded yet.
type peerList struct {
	pods       []*snapshot.Pod
	head, tail int
}

// balance runs one pass (see above); it reports whether it was kept.
func (p *packer) balance() bool {
	nodes := p.fillNodes()
	if len(nodes) < 2 {
		return false
	}
	before, on := plannedPrice(nodes), p.templatesOn()
	b := newBalancer(p, nodes)
	if len(b.peers) == 0 {
		return false
	}
	order := slices.Clone(nodes)
	slices.SortStableFunc(order, func(x, y *snapshot.Node) int { return cmp.Compare(y.Current.Price*tilt(y), x.Current.Price*tilt(x)) })
	kept := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, n := range order {
			b.relieve(n)
		}
		for _, n := range nodes {
			if b.traded[n] {
				p.s.Widen(n, p.byNode[n].Template.Node.Flex.Options)
			}
		}
		if p.templatesChanged(on) {
			return false, nil
		}
		after := plannedPrice(nodes)
		kept = after < before*(1-fillMinGain)
		return kept, nil
	})
	p.podsRemoved()
	return kept
}

func newBalancer(p *packer, nodes []*snapshot.Node) *balancer {
	b := &balancer{p: p, peers: map[uint64]*peerList{},
		used: map[*snapshot.Pod]bool{}, traded: map[*snapshot.Node]bool{}}
	var cpu, mem int64
	for _, n := range nodes {
		room, _ := n.Current.Free()
		cpu, mem = cpu+room.MilliCPU, mem+room.Memory
	}
	if cpu <= 0 || mem <= 0 {
		return b
	}
	b.perByte = float64(cpu) / float64(mem)
	for _, n := range nodes {
		if n.Flex == nil {
			continue
		}
		for _, q := range n.Pods {
			if !movable(q.Class) {
				continue
			}
			k := b.key(q.Class)
			if b.peers[k] == nil {
				b.peers[k] = &peerList{}
			}
			b.peers[k].pods = append(b.peers[k].pods, q)
		}
	}
	for k, l := range b.peers {
		if len(l.pods) < 2 {
			delete(b.peers, k)
			continue
		}
		l.tail = len(l.pods)
		slices.SortStableFunc(l.pods, func(x, y *snapshot.Pod) int {
			return cmp.Or(cmp.Compare(b.lean(y), b.lean(x)), cmp.Compare(x.Name, y.Name))
		})
	}
	return b
}

// lean is how much heavier q is in cpu than in memory, in milli-cpu.
func (b *balancer) lean(q *snapshot.Pod) float64 {
	return float64(q.Class.Requests.MilliCPU) - b.perByte*float64(q.Class.Requests.Memory)
}

// tilt is how far apart n's shares of cpu and memory are: 0 on a node
// that uses both alike.
func tilt(n *snapshot.Node) float64 {
	cpu, mem := shares(n)
	return math.Abs(cpu - mem)
}

// memoryBound reports whether n uses a larger share of its memory than
// of its cpu.
func memoryBound(n *snapshot.Node) bool {
	cpu, mem := shares(n)
	return mem > cpu
}

// relieve trades n's pods, those heaviest in what n is full of first,
// for pods of nodes full in the other resource, while n stays full in the
// same one.
func (b *balancer) relieve(n *snapshot.Node) {
	if n.Unschedulable || n.Flex == nil || len(n.Pods) == 0 || n.Current == nil {
		return
	}
	mem := memoryBound(n)
	own := slices.Clone(n.Pods)
	slices.SortStableFunc(own, func(x, y *snapshot.Pod) int {
		if mem {
			return cmp.Compare(b.lean(x), b.lean(y))
		}
		return cmp.Compare(b.lean(y), b.lean(x))
	})
	for _, a := range own {
		if memoryBound(n) != mem || tilt(n) < tiltDone {
			return
		}
		if b.used[a] || !movable(a.Class) {
			continue
		}
		if q := b.tradeAway(a, mem); q != nil {
			b.used[a], b.used[q] = true, true
			b.traded[a.Node], b.traded[q.Node] = true, true
		}
	}
}

// tiltDone: a node whose shares of cpu and memory are this close is left
// as it is.
const tiltDone = 0.02

// tradeAway trades a (on a node full in memory when mem, else in cpu) for
// a pod of equal constraints on a node full in the other resource that leans
// the other way. It returns the pod it traded a for, nil for none.
func (b *balancer) tradeAway(a *snapshot.Pod, mem bool) *snapshot.Pod {
	l := b.peers[b.key(a.Class)]
	if l == nil {
		return nil
	}
	la := b.lean(a)
	// A node full in memory wants the pods leaning most to cpu: the
	// list's head; one full in cpu, its tail. Traded pods count as looks
	// (those at either end are skipped for good).
	for l.head < l.tail && b.used[l.pods[l.head]] {
		l.head++
	}
	for l.tail > l.head && b.used[l.pods[l.tail-1]] {
		l.tail--
	}
	for i := range min(balanceLooks, l.tail-l.head) {
		at := l.head + i
		if !mem {
			at = l.tail - 1 - i
		}
		q := l.pods[at]
		if b.used[q] {
			continue
		}
		if (mem && b.lean(q) <= la) || (!mem && b.lean(q) >= la) {
			return nil
		}
		to := q.Node
		if q == a || to == a.Node || to.Unschedulable || to.Flex == nil || memoryBound(to) == mem || !b.gains(a, q) {
			continue
		}
		b.p.trade(a, q)
		return q
	}
	return nil
}

// gains reports whether trading a and q keeps both nodes within their
// types and lowers the part of their prices their pods use.
func (b *balancer) gains(a, q *snapshot.Pod) bool {
	from, to := a.Node, q.Node
	if !b.p.oneWeight && b.p.byNode[from].Template.Weight != b.p.byNode[to].Template.Weight {
		return false // a group's weight outranks price
	}
	before := usedPrice(from, nil, nil) + usedPrice(to, nil, nil)
	after := usedPrice(from, a, q) + usedPrice(to, q, a)
	return after < before-minSaving
}

// usedPrice is the part of n's price its pods use, with out traded for
// in (neither when nil): the price times the larger share of its room in
// cpu or memory they ask for (level); +Inf when they do not fit.
func usedPrice(n *snapshot.Node, out, in *snapshot.Pod) float64 {
	req := n.Requested
	if out != nil {
		req = req.Clone()
		req.Sub(&out.Class.Requests)
		req.Add(&in.Class.Requests)
	}
	room, _ := n.Current.Free()
	if !snapshot.Fits(&req, &snapshot.Resources{}, &room) {
		return math.Inf(1)
	}
	return n.Current.Price * max(share(req.MilliCPU, room.MilliCPU), share(req.Memory, room.Memory))
}

// trade swaps the nodes of a and q, pods of equal constraints; the
// caller checked that both nodes hold their new pods in their current
// types.
func (p *packer) trade(a, q *snapshot.Pod) {
	s, from, to := p.s, a.Node, q.Node
	s.RemovePod(a)
	s.RemovePod(q)
	s.AddPod(a, to)
	s.AddPod(q, from)
}

// key groups the pods that may trade places: those of equal constraints.
func (b *balancer) key(c *snapshot.Class) uint64 { return b.p.s.Constraints(c) }
