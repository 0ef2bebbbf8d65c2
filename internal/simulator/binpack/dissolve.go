package binpack

import (
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
// cheapest new node.
func (p *packer) dissolve(nn *NewNode) {
	if nn.Initial || nn.Node.Unschedulable || len(nn.Node.Pods) == 0 {
		return
	}
	pods := slices.Clone(nn.Node.Pods)
	tr := &trial{}
	base := len(p.s.Nodes)
	keep := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, pod := range pods {
			p.s.RemovePod(pod)
		}
		p.s.Retire(nn.Node)
		for _, pod := range pods {
			if !p.placeOnRoom(tr, pod) && !p.makeRoom(tr, pod, nn.Template.Weight) && !p.placeOnNew(tr, pod, nn.Template.Weight) {
				return false, nil
			}
		}
		keep = tr.cost < nn.Node.Current.Price-minSaving
		return keep, nil
	})
	if !keep {
		p.forgetNodesFrom(base)
		return
	}
	p.replaced([]*NewNode{nn}, tr.opened)
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
		room := e.Allocatable
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
// only if every guest found a place.
func (p *packer) evictGuests(tr *trial, x *snapshot.Pod, e *snapshot.Node, guests []*snapshot.Pod, minWeight int32) bool {
	saved := *tr
	ok := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, g := range guests {
			p.s.RemovePod(g)
		}
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
		return true, nil
	})
	if !ok {
		*tr = saved
		return false
	}
	return true
}

// cheapestTemplate is the template, of weight at least minWeight, with
// the cheapest option that holds a pod of class c alone, and its options
// that fit the pod.
func (p *packer) cheapestTemplate(c *snapshot.Class, minWeight int32) (*Template, []*snapshot.Option) {
	var (
		best     *Template
		bestOpts []*snapshot.Option
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
		if o := snapshot.Cheapest(opts); best == nil || o.Price < price {
			best, bestOpts, price = t, opts, o.Price
		}
	}
	return best, bestOpts
}

// price is what a node adds to the plan: its current option's price if
// it is planned, nothing if it exists.
func price(n *snapshot.Node) float64 {
	if n.Planned {
		return n.Current.Price
	}
	return 0
}
