package binpack

import (
	"math"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// lowerBound bounds from below what the pods a search has still to place
// add to the plan's price: what they request beyond the room of the
// hosts and of the nodes the search opened (grown to their largest
// option, as if that were free), at the lowest price per core and per
// byte of any option. It ignores every filter, so it never prunes a
// branch that could beat the best plan.
type lowerBound struct {
	// need[i] is what pods[i:] request.
	need []snapshot.Resources
	// perCPU and perByte are the lowest prices of a millicore and a byte
	// of room for pods, over every option of every template.
	perCPU, perByte float64
}

func newLowerBound(p *packer, pods []*snapshot.Pod, hosts []*snapshot.Node) *lowerBound {
	lb := &lowerBound{need: make([]snapshot.Resources, len(pods)+1), perCPU: math.Inf(1), perByte: math.Inf(1)}
	for i := len(pods) - 1; i >= 0; i-- {
		lb.need[i] = lb.need[i+1].Clone()
		lb.need[i].Add(&pods[i].Class.Requests)
	}
	for _, t := range p.in.Templates {
		for _, o := range t.Node.Flex.Options {
			free, _ := o.Free()
			if free.MilliCPU > 0 {
				lb.perCPU = min(lb.perCPU, o.Price/float64(free.MilliCPU))
			}
			if free.Memory > 0 {
				lb.perByte = min(lb.perByte, o.Price/float64(free.Memory))
			}
		}
	}
	return lb
}

// remaining is the bound for pods[i:] in the search's current state.
func (lb *lowerBound) remaining(s *searcher, i int) float64 {
	need := &lb.need[i]
	if need.IsZero() {
		return 0
	}
	var cpu, mem int64
	room := func(n *snapshot.Node) {
		cpu += max(n.Allocatable.MilliCPU-n.Requested.MilliCPU, 0)
		mem += max(n.Allocatable.Memory-n.Requested.Memory, 0)
	}
	for _, h := range s.hosts {
		room(h)
	}
	for _, n := range s.bins {
		room(n)
	}
	bound := 0.0
	if over := need.MilliCPU - cpu; over > 0 && !math.IsInf(lb.perCPU, 1) {
		bound = float64(over) * lb.perCPU
	}
	if over := need.Memory - mem; over > 0 && !math.IsInf(lb.perByte, 1) {
		bound = max(bound, float64(over)*lb.perByte)
	}
	return bound
}

// planPrice is what the plan's planned nodes cost, minSize nodes aside
// (they are bought whatever the pods do).
func (p *packer) planPrice() float64 {
	total := 0.0
	for _, nn := range p.liveNodes() {
		total += nn.Node.Current.Price
	}
	return total
}

// liveNodes are the planned nodes the plan opened for its pods, minSize
// nodes aside.
func (p *packer) liveNodes() []*NewNode {
	var out []*NewNode
	for _, nn := range p.res.NewNodes {
		if !nn.Initial && !nn.Node.Unschedulable {
			out = append(out, nn)
		}
	}
	return out
}

// isInitial reports whether planned node n was opened for a group's
// minSize.
func (p *packer) isInitial(n *snapshot.Node) bool {
	nn := p.byNode[n]
	return nn != nil && nn.Initial
}

// nominated reports whether a pod is to go on the node it is nominated
// to (the search leaves such pods where they are).
func (p *packer) nominated(pod *snapshot.Pod) bool {
	_, ok := p.in.Nominated[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	return ok
}

// placedAll records, after the search placed pods the greedy pass left
// out, where they go; settle updates the others.
func (p *packer) placedAll() {
	have := map[*snapshot.Pod]bool{}
	for _, pod := range p.res.Unplaced {
		have[pod] = true
	}
	var left []*snapshot.Pod
	for _, pod := range p.pending {
		switch {
		case have[pod] && pod.Node != nil:
			p.res.Placements = append(p.res.Placements, Placement{Pod: pod.Pod, Node: pod.Node})
		case have[pod]:
			left = append(left, pod)
		}
	}
	p.res.Unplaced = left
}
