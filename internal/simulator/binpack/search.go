package binpack

import (
	"math"
	"slices"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// The greedy pass and the moves of improve are local: each looks at one
// pod, one node or a few nodes at a time. Some plans need several pods to
// trade places at once (two pods on existing nodes swap so that a pod
// bound to a zone fits there, and the new node goes where it is cheap),
// which no single move finds. A small round is therefore also searched
// exactly: every placement of its pending pods on the nodes that may hold
// them, on the nodes the search opens and on new nodes of the
// highest-weight templates that fit each pod (weight comes before price,
// as in the greedy pass), branch and bound against the best plan found so
// far (the improved greedy plan first), within a budget of placements
// tried. A plan the search finds replaces the greedy one only when it
// places every pod the greedy plan left out or costs less; every
// placement goes through the filters, in the order the search made it,
// and the whole plan through holds.

// searchMaxPods and searchMaxHosts: a round is searched when it has at
// most this many pending pods and nodes that may hold them (existing,
// launching and minSize nodes): the search's cost grows with both, and
// past a few dozen it would rarely finish within its budget.
const (
	searchMaxPods  = 12
	searchMaxHosts = 16
)

// searchBudget bounds the placements one search tries: a search that does
// not finish within it keeps the best plan it found. A placement, with
// the filter runs of its branch, costs 5-30 microseconds, so a search
// that runs out takes up to about 0.3 s; on the cost-quality test's
// clusters this budget leaves none above 1.25x the optimum (5,000 left
// two).
const searchBudget = 10_000

// choice is where the search puts one pod: on a host, on the bin-th node
// the search opened, or on a new node of template t with options opts.
type choice struct {
	host *snapshot.Node
	bin  int
	t    *Template
	opts []*snapshot.Option
}

// searcher is the state of one search.
type searcher struct {
	p     *packer
	pods  []*snapshot.Pod
	hosts []*snapshot.Node
	// bins are the nodes the search opened, in order; rank maps a node
	// (host or bin) to its place in the candidate order, for symmetry.
	bins []*snapshot.Node
	rank map[*snapshot.Node]int
	// path is the choice of each pod placed so far; best the cheapest
	// complete path found and its cost.
	path, best []choice
	cost, ub   float64
	tries      int
	lb         *lowerBound
}

// search searches the round exactly when it is small and keeps a better
// plan than the one the greedy pass and improve made.
func (p *packer) search() {
	pods, hosts, ok := p.searchable()
	if !ok {
		return
	}
	s := &searcher{p: p, hosts: hosts, rank: map[*snapshot.Node]int{}}
	old := p.liveNodes()
	ub := p.planPrice() - minSaving // before clear retires the plan's nodes
	base := len(p.s.Nodes)
	_ = p.s.WithFork(func() (bool, error) {
		s.clear(old)
		for i, h := range hosts {
			s.rank[h] = i
		}
		s.pods = s.placeable(pods)
		s.ub = ub
		for _, pod := range p.res.Unplaced {
			if slices.Contains(s.pods, pod) {
				s.ub = math.Inf(1) // any plan that places it is better
			}
		}
		s.lb = newLowerBound(p, s.pods, hosts)
		s.dfs(0)
		return false, nil
	})
	p.forgetNodesFrom(base)
	if s.best != nil {
		s.apply(old)
	}
}

// searchable returns the pods to search and the nodes that may hold them,
// or false when the round is not searched.
func (p *packer) searchable() ([]*snapshot.Pod, []*snapshot.Node, bool) {
	if len(p.pending) > searchMaxPods || len(p.pending) < 2 {
		return nil, nil, false
	}
	for _, pod := range p.pending {
		if len(pod.Class.Claims) > 0 || p.nominated(pod) {
			return nil, nil, false
		}
	}
	var hosts []*snapshot.Node
	for _, n := range p.s.Nodes {
		if n.Unschedulable || (n.Planned && !p.isInitial(n)) {
			continue
		}
		hosts = append(hosts, n)
		if len(hosts) > searchMaxHosts {
			return nil, nil, false
		}
	}
	pods := slices.Clone(p.pending)
	sortPods(p.s, pods, orderDefault)
	return pods, hosts, true
}

// placeable returns the pods that may fit somewhere: pods that every host
// and every template refuses for good (Unresolvable) stay out of the
// search, and out of the plan.
func (s *searcher) placeable(pods []*snapshot.Pod) []*snapshot.Pod {
	out := pods[:0:0]
	for _, pod := range pods {
		maybe := false
		for _, h := range s.hosts {
			maybe = maybe || predicates.Run(s.p.in.Filters, s.p.s, pod.Class, h).Code != predicates.Unresolvable
		}
		for _, t := range s.p.in.Templates {
			if !maybe && s.p.s.TemplateAvailable(t.Node) {
				_, st := s.p.fit(pod.Class, t)
				maybe = st.Code != predicates.Unresolvable
			}
		}
		if maybe {
			out = append(out, pod)
		}
	}
	return out
}

// clear takes every pending pod off its node and drops the planned nodes
// the plan opened for them (minSize nodes stay), on the search's fork.
func (s *searcher) clear(old []*NewNode) {
	for _, pod := range s.p.pending {
		if pod.Node != nil {
			s.p.s.RemovePod(pod)
		}
	}
	for _, nn := range old {
		s.p.retire(nn.Node)
	}
	s.p.podsRemoved()
}

// dfs places pods[i:] in every way that may beat the best plan found.
func (s *searcher) dfs(i int) {
	if s.tries >= searchBudget {
		return
	}
	if i == len(s.pods) {
		if s.cost < s.ub && s.p.holds() {
			s.ub, s.best = s.cost-minSaving, slices.Clone(s.path)
		}
		return
	}
	if s.cost+s.lb.remaining(s, i) >= s.ub {
		return
	}
	pod := s.pods[i]
	from := 0
	if i > 0 && s.pods[i-1].Class == pod.Class && !dependsOnOthers(pod.Class) {
		// Identical pods: each set of nodes once, in node order. Not for
		// pods with spread or pod affinity, where the order they are
		// placed in decides what fits (a spread domain that leaves when
		// its group fills up).
		from = s.rank[s.pods[i-1].Node]
	}
	for _, h := range s.hosts {
		if s.rank[h] >= from && s.fits(pod, h) {
			s.try(i, choice{host: h, bin: -1})
		}
	}
	for k, n := range s.bins {
		if s.rank[n] >= from && s.fits(pod, n) {
			s.try(i, choice{bin: k})
		}
	}
	for _, c := range s.newNodeChoices(pod) {
		s.try(i, c)
	}
}

// newNodeChoices are the new nodes a pod may open: of the templates that
// fit it, those of the highest weight, as the greedy pass chooses (a
// group's weight comes before price).
func (s *searcher) newNodeChoices(pod *snapshot.Pod) []choice {
	var out []choice
	for _, t := range s.p.in.Templates {
		if !s.p.s.TemplateAvailable(t.Node) || (len(out) > 0 && t.Weight < out[0].t.Weight) {
			continue
		}
		opts, st := s.p.fit(pod.Class, t)
		if st.Failed() {
			continue
		}
		if len(out) > 0 && t.Weight > out[0].t.Weight {
			out = out[:0]
		}
		out = append(out, choice{t: t, opts: opts, bin: -1})
	}
	return out
}

func (s *searcher) fits(pod *snapshot.Pod, n *snapshot.Node) bool {
	return !predicates.Run(s.p.in.Filters, s.p.s, pod.Class, n).Failed()
}

// try places pod i as c on a fork, searches on, and reverts.
func (s *searcher) try(i int, c choice) {
	s.tries++
	p, pod := s.p, s.pods[i]
	cost := s.cost
	p.s.Fork()
	n := s.nodeFor(c, &s.bins)
	before := price(n)
	if c.t != nil {
		s.rank[n] = len(s.hosts) + len(s.bins) - 1
		before = 0 // the node is bought for this pod
	}
	p.s.AddPod(pod, n)
	s.cost += price(n) - before
	s.path = append(s.path, c)
	s.dfs(i + 1)
	s.path = s.path[:len(s.path)-1]
	p.s.Revert()
	s.cost = cost
	if c.t != nil {
		s.bins = s.bins[:len(s.bins)-1]
		delete(s.rank, n)
	}
}

// nodeFor is the node choice c puts a pod on; a new node of c's template
// is opened and appended to bins.
func (s *searcher) nodeFor(c choice, bins *[]*snapshot.Node) *snapshot.Node {
	switch {
	case c.host != nil:
		return c.host
	case c.t == nil:
		return (*bins)[c.bin]
	}
	n := s.p.plannedNode(c.t, c.opts, len(*bins)+1)
	s.p.s.AddNode(n)
	s.p.refreshTemplates()
	*bins = append(*bins, n)
	return n
}

// apply replays the best path on the snapshot and makes it the plan.
func (s *searcher) apply(old []*NewNode) {
	p := s.p
	var (
		bins   []*snapshot.Node
		opened []*NewNode
	)
	_ = p.s.WithFork(func() (bool, error) {
		s.clear(old)
		for i, c := range s.best {
			n := s.nodeFor(c, &bins)
			if c.t != nil {
				opened = append(opened, &NewNode{Node: n, Template: c.t})
			}
			p.s.AddPod(s.pods[i], n)
		}
		return true, nil
	})
	p.replaced(old, opened)
	p.placedAll()
}
