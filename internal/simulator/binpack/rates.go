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
	h := p.s.LimitRoomOf(n)
	var next *snapshot.Option
	for _, o := range n.Flex.Options {
		if (next == nil || o.Price < next.Price) && n.FitsOption(o, c.RequestsOn(n), c.PodsOn(n)) && h.AllowsOption(o) && p.matchesOption(o, c) &&
			p.s.OptionHasDevices(n, o, c) {
			next = o
		}
	}
	if next == nil {
		return math.Inf(1)
	}
	gained := p.units(next, c) - p.units(n.Current, c)
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
	if t, opts := p.chooseTemplate(c); opts != nil {
		// fitCost's cached entry for t, if it is the one chooseTemplate
		// just used, keeps the rate for other classes of these requests.
		key := fitKeyOf(c, t)
		f, cached := p.fits[key]
		cached = cached && sameSlice(f.opts, opts)
		if cached && f.rated {
			best = f.rate
		} else {
			for _, o := range opts {
				if u := p.units(o, c); u > 0 {
					best = min(best, o.Price/u)
				}
			}
			if cached {
				f.rate, f.rated = best, true
				p.fits[key] = f
			}
		}
	}
	p.rates[c.ID] = best
	return best
}

// units is how many pods of class c an option holds, fractionally: its
// free capacity divided by the request, for the scarcest resource, devices
// included.
func (p *packer) units(o *snapshot.Option, c *snapshot.Class) float64 {
	r := &c.Requests
	free, pods := o.Free()
	u := min(float64(pods)/float64(1+c.AddOnPods), p.s.DeviceUnits(o, c))
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

// fitsCurrent reports whether a pod of class c fits planned node n as it
// is: in the room and labels of its current option, so that adding it does
// not move the node to a dearer option (a pod that selects on-demand
// capacity narrows a node that could be spot).
func (p *packer) fitsCurrent(n *snapshot.Node, c *snapshot.Class) bool {
	return n.FitsOption(n.Current, c.RequestsOn(n), c.PodsOn(n)) && p.matchesOption(n.Current, c) && p.s.OptionHasDevices(n, n.Current, c)
}

// matchesOption reports whether option o's labels (instance type, capacity
// type, architecture) satisfy the node selection of class c and its bound
// volumes' node affinity.
func (p *packer) matchesOption(o *snapshot.Option, c *snapshot.Class) bool {
	return !p.s.ReferencesOptionKeys(c) || c.MatchesOption(o.Node)
}
