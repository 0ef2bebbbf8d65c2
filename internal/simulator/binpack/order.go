package binpack

import (
	"cmp"
	"math"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// podOrder is an order in which the greedy pass takes pods (after
// priority, which always comes first).
type podOrder int

const (
	// orderDefault: constrained pods first, then by size (cpu and memory
	// weighed at 1 core ~ 4 GiB), biggest first.
	orderDefault podOrder = iota
	// orderSize: by size only, biggest first.
	orderSize
	// orderCPU and orderMemory: by one resource, biggest first.
	orderCPU
	orderMemory
	// orderSmallFirst: constrained pods first, then smallest first.
	orderSmallFirst
)

var podOrders = []podOrder{orderDefault, orderSize, orderCPU, orderMemory, orderSmallFirst}

func (o podOrder) compare(a, b *snapshot.Class) int {
	ra, rb := &a.Requests, &b.Requests
	switch o {
	case orderSize:
		return cmp.Compare(size(rb), size(ra))
	case orderCPU:
		return cmp.Or(cmp.Compare(rb.MilliCPU, ra.MilliCPU), cmp.Compare(rb.Memory, ra.Memory))
	case orderMemory:
		return cmp.Or(cmp.Compare(rb.Memory, ra.Memory), cmp.Compare(rb.MilliCPU, ra.MilliCPU))
	case orderSmallFirst:
		return cmp.Or(cmp.Compare(constrained(b), constrained(a)), cmp.Compare(size(ra), size(rb)))
	}
	return cmp.Or(cmp.Compare(constrained(b), constrained(a)), cmp.Compare(size(rb), size(ra)))
}

// portfolioMaxPods: a round with at most this many pending pods is packed
// in every order of podOrders, each on a fork of the snapshot, and the
// order giving the best plan (fewest pods left out, then lowest price) is
// used. No single greedy order is best for every small cluster (a pod
// taken early can block the only room a later one has), and for a few
// dozen pods trying five costs well under a millisecond; bigger rounds,
// where one pod's choice matters less, use orderDefault alone.
const portfolioMaxPods = 32

// bestOrder returns the order to pack pods in.
func bestOrder(in Input, pods []*snapshot.Pod, static shapeFailures) podOrder {
	if len(pods) > portfolioMaxPods || len(pods) < 2 {
		return orderDefault
	}
	best, bestUnplaced, bestPrice := orderDefault, math.MaxInt, math.Inf(1)
	for _, order := range podOrders {
		var unplaced int
		var price float64
		_ = in.Snapshot.WithFork(func() (bool, error) {
			p := newPacker(in, static)
			p.trial = true
			p.run(pods, order)
			unplaced = len(p.res.Unplaced)
			for _, nn := range p.res.NewNodes {
				if nn.Option != nil { // none when no option holds the node's pods: scaleup reports it
					price += nn.Option.Price
				}
			}
			return false, nil
		})
		if unplaced < bestUnplaced || (unplaced == bestUnplaced && price < bestPrice-minSaving) {
			best, bestUnplaced, bestPrice = order, unplaced, price
		}
	}
	return best
}
