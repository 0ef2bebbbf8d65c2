package binpack

import (
	"math"
	"slices"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// trial is the state of one improvement being tried on a fork: the nodes
// it opened and what it adds to the plan's price.
type trial struct {
	opened []*NewNode
	cost   float64
}

// dissolve re-places the pods of nn elsewhere and keeps the change when
// that costs less than nn: on room other nodes have, on an existing node
// freed by moving the pods this plan put there (makeRoom), or on the
// cheapest new node. Each pod either takes the first of these that works,
// or the cheaper of the last two (placeCheaper); neither rule is better on
// every cluster, so both are tried and the cheaper result kept.
func (p *packer) dissolve(nn *NewNode) {
	if nn.Initial || nn.Node.Unschedulable || len(nn.Node.Pods) == 0 {
		return
	}
	best, bestCost := -1, nn.Node.Current.Price-minSaving
	for rule := range 2 {
		if cost, ok := p.tryDissolve(nn, rule == 1, false); ok && cost < bestCost {
			best, bestCost = rule, cost-minSaving
		}
	}
	if best >= 0 {
		p.tryDissolve(nn, best == 1, true)
	}
}

// tryDissolve is one try of dissolve; it returns what the pods cost in
// their new places and keeps the change only if keep is set.
func (p *packer) tryDissolve(nn *NewNode, cheaper, keep bool) (float64, bool) {
	pods := slices.Clone(nn.Node.Pods)
	tr := &trial{}
	base := len(p.s.Nodes)
	ok := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, pod := range pods {
			p.s.RemovePod(pod)
		}
		p.retire(nn.Node)
		p.podsRemoved()
		for _, pod := range pods {
			if p.placeOnRoom(tr, pod) {
				continue
			}
			if cheaper && !p.placeCheaper(tr, pod, nn.Template.Weight) {
				return false, nil
			}
			if !cheaper && !p.makeRoom(tr, pod, nn.Template.Weight) && !p.placeOnNew(tr, pod, nn.Template.Weight) {
				return false, nil
			}
		}
		ok = p.holds()
		return keep && ok, nil
	})
	if !ok || !keep {
		p.forgetNodesFrom(base)
		return tr.cost, ok
	}
	p.replaced([]*NewNode{nn}, tr.opened)
	return tr.cost, true
}

// placeOnRoom puts pod on the first node with room for it as it is.
func (p *packer) placeOnRoom(tr *trial, pod *snapshot.Pod) bool {
	fit, _ := p.scanNodes(pod.Class)
	if fit == nil {
		return false
	}
	// A pod may narrow a planned node to dearer options (a node selector
	// on the capacity type, say).
	before := price(fit)
	p.s.AddPod(pod, fit)
	tr.cost += price(fit) - before
	return true
}

// placeCheaper puts pod, which fits no room as it is, where it adds less
// to the plan: on an existing node freed by moving its guests (makeRoom,
// which may open nodes for them) or on the cheapest new node of its own.
// Taking the first that works would, for example, move a pod off an
// existing node to make room for one that then needs a new node for the
// moved pod anyway, where the next pod of the node being dissolved could
// have used that room for free.
func (p *packer) placeCheaper(tr *trial, pod *snapshot.Pod, minWeight int32) bool {
	newPrice := math.Inf(1)
	if t, opts := p.cheapestTemplate(pod.Class, minWeight); t != nil {
		newPrice = snapshot.Cheapest(opts).Price
	}
	probe := trial{opened: slices.Clone(tr.opened), cost: tr.cost}
	roomPrice := math.Inf(1)
	base := len(p.s.Nodes)
	_ = p.s.WithFork(func() (bool, error) {
		if p.makeRoom(&probe, pod, minWeight) {
			roomPrice = probe.cost - tr.cost
		}
		return false, nil
	})
	p.forgetNodesFrom(base)
	if roomPrice < newPrice-minSaving {
		return p.makeRoom(tr, pod, minWeight)
	}
	return p.placeOnNew(tr, pod, minWeight)
}

// placeOnNew opens the cheapest new node for pod alone.
func (p *packer) placeOnNew(tr *trial, pod *snapshot.Pod, minWeight int32) bool {
	t, opts := p.cheapestTemplate(pod.Class, minWeight)
	if t == nil {
		return false
	}
	n := p.plannedNode(t, opts, len(tr.opened)+1)
	p.s.AddNode(n)
	p.s.AddPod(pod, n)
	tr.opened = append(tr.opened, &NewNode{Node: n, Template: t})
	tr.cost += n.Current.Price
	return true
}

// roomTries bounds how many existing nodes makeRoom tries per pod.
const roomTries = 16

// makeRoom places pod x on an existing node by moving the pending pods
// placed there in this plan (its guests) elsewhere: the greedy pass fills
// existing nodes first come, first served, which can leave a pod that only
// fits there (it selects their capacity type, say) without a place while
// a guest could have gone anywhere.
func (p *packer) makeRoom(tr *trial, x *snapshot.Pod, minWeight int32) bool {
	guests := map[*snapshot.Node][]*snapshot.Pod{}
	var hosts []*snapshot.Node
	for _, g := range p.pending {
		if g.Node != nil && !g.Node.Planned {
			if len(guests[g.Node]) == 0 {
				hosts = append(hosts, g.Node)
			}
			guests[g.Node] = append(guests[g.Node], g)
		}
	}
	tries := 0
	for _, e := range hosts {
		if tries == roomTries {
			break
		}
		room := e.Allocatable.Clone() // the node's own extended resources stay as they are
		room.Sub(&e.Requested)
		for _, g := range guests[e] {
			room.Add(&g.Class.Requests)
		}
		if !snapshot.Fits(&x.Class.Requests, &snapshot.Resources{}, &room) {
			continue
		}
		tries++
		if p.evictGuests(tr, x, e, guests[e], minWeight) {
			return true
		}
	}
	return false
}

// evictGuests takes the guests off existing node e, puts x there, and
// places each guest on room elsewhere or a new node; it keeps the change
// only if every guest found a place. The guests go back first come, first
// served, so the first may take the room on e that a later one, which fits
// nowhere else, needed; when the listed order opens a new node, the
// reverse order is tried too and the cheaper kept.
func (p *packer) evictGuests(tr *trial, x *snapshot.Pod, e *snapshot.Node, guests []*snapshot.Pod, minWeight int32) bool {
	orders := [][]*snapshot.Pod{guests}
	if len(guests) > 1 {
		reversed := slices.Clone(guests)
		slices.Reverse(reversed)
		orders = append(orders, reversed)
	}
	best, bestCost := -1, 0.0
	for i, order := range orders {
		cost, ok := p.tryEvict(tr, x, e, order, minWeight, false)
		if ok && (best < 0 || cost < bestCost-minSaving) {
			best, bestCost = i, cost
		}
		if ok && cost <= tr.cost+minSaving {
			break // nothing new opened: no order does better
		}
	}
	if best < 0 {
		return false
	}
	_, ok := p.tryEvict(tr, x, e, orders[best], minWeight, true)
	return ok
}

// tryEvict is one try of evictGuests with the guests in the given order.
// It returns the trial's cost with the try included; it keeps the change
// on the snapshot and in tr only if keep is set and every guest was placed.
func (p *packer) tryEvict(tr *trial, x *snapshot.Pod, e *snapshot.Node, guests []*snapshot.Pod, minWeight int32, keep bool) (float64, bool) {
	saved := *tr
	saved.opened = slices.Clone(tr.opened)
	base := len(p.s.Nodes)
	ok := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, g := range guests {
			p.s.RemovePod(g)
		}
		p.podsRemoved()
		if predicates.Run(p.in.Filters, p.s, x.Class, e).Failed() {
			return false, nil
		}
		p.s.AddPod(x, e)
		for _, g := range guests {
			if !p.placeOnRoom(tr, g) && !p.placeOnNew(tr, g, minWeight) {
				return false, nil
			}
		}
		ok = true
		return keep, nil
	})
	cost := tr.cost
	if !ok || !keep {
		*tr = saved
		p.forgetNodesFrom(base) // the nodes the try opened are gone
	}
	return cost, ok
}

// cheapestTemplate is the template, of weight at least minWeight, with
// the cheapest option that holds a pod of class c alone, and its options
// that fit the pod.
func (p *packer) cheapestTemplate(c *snapshot.Class, minWeight int32) (*Template, []*snapshot.Option) {
	var (
		ties     []*Template
		tiedOpts [][]*snapshot.Option
		price    float64
	)
	for _, t := range p.in.Templates {
		if t.Weight < minWeight || !p.s.TemplateAvailable(t.Node) {
			continue
		}
		opts, st := p.fit(c, t)
		if st.Failed() {
			continue
		}
		switch o := snapshot.Cheapest(opts); {
		case len(ties) == 0 || o.Price < price-minSaving:
			ties, tiedOpts, price = []*Template{t}, [][]*snapshot.Option{opts}, o.Price
		case tied(o.Price, price):
			ties, tiedOpts = append(ties, t), append(tiedOpts, opts)
		}
	}
	if len(ties) == 0 {
		return nil, nil
	}
	i := p.preferredTemplate(c, ties, tiedOpts)
	return ties[i], tiedOpts[i]
}

// price is what a node adds to the plan: its current option's price if
// it is planned, nothing if it exists.
func price(n *snapshot.Node) float64 {
	if n.Planned {
		return n.Current.Price
	}
	return 0
}
