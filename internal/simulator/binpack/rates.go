package binpack

import (
	"math"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// growthRate is what a planned node costs per pod-sized unit of capacity
// it gains by moving to the cheapest option that fits its pods and a pod of
// class c. Growing buys room for later pods too, so it is compared per unit
// with what a new node would cost, not as a bare price difference.
func (p *packer) growthRate(n *snapshot.Node, c *snapshot.Class) float64 {
	h := p.s.LimitRoom(n.NodeGroup, &n.Capacity)
	var next *snapshot.Option
	for _, o := range n.Flex.Options {
		if (next == nil || o.Price < next.Price) && n.FitsOption(o, &c.Requests) && h.Allows(&o.Allocatable) {
			next = o
		}
	}
	if next == nil {
		return math.Inf(1)
	}
	gained := units(next, &c.Requests) - units(n.Current, &c.Requests)
	if gained <= 0 {
		return math.Inf(1)
	}
	return (next.Price - n.Current.Price) / gained
}

// newNodeRate is the lowest price per pod-sized unit among the options a
// new node for a pod of class c could be launched as. It only guides the
// choice between growing a node and opening one, so it is computed once per
// class and round; a node is always opened from a fresh template choice.
func (p *packer) newNodeRate(c *snapshot.Class) float64 {
	if r, ok := p.rates[c.ID]; ok {
		return r
	}
	best := math.Inf(1)
	if _, opts := p.chooseTemplate(c); opts != nil {
		for _, o := range opts {
			if u := units(o, &c.Requests); u > 0 {
				best = min(best, o.Price/u)
			}
		}
	}
	p.rates[c.ID] = best
	return best
}

// units is how many pods of requests r an option holds, fractionally: its
// free capacity divided by the request, for the scarcest resource.
func units(o *snapshot.Option, r *snapshot.Resources) float64 {
	free, pods := o.Free()
	u := float64(pods)
	ratio := func(req, have int64) {
		if req > 0 {
			u = min(u, float64(have)/float64(req))
		}
	}
	ratio(r.MilliCPU, free.MilliCPU)
	ratio(r.Memory, free.Memory)
	ratio(r.EphemeralStorage, free.EphemeralStorage)
	for k, v := range r.Scalar {
		ratio(v, free.Scalar[k])
	}
	return u
}
