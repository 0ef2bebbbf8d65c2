package binpack

import (
	"math"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// repack re-packs the pods of the planned nodes olds onto new nodes
// chosen by their price per pod held, and keeps the result when it costs
// less. With one node it splits: several smaller nodes can cost less than
// the one big node the greedy pass grew (ten small pods fit one 8-cpu
// node, or a 4-cpu and a 2-cpu node that cost less together); with two it
// re-deals their pods. It tries every launchable option for every
// remaining pod, so improve runs it only in small rounds.
func (p *packer) repack(olds ...*NewNode) {
	var (
		pods   []*snapshot.Pod
		old    float64
		weight int32
	)
	for _, nn := range olds {
		if nn.Initial || nn.Node.Unschedulable || len(nn.Node.Pods) == 0 {
			return
		}
		pods = append(pods, nn.Node.Pods...)
		old += nn.Node.Current.Price
		weight = max(weight, nn.Template.Weight)
	}
	if len(pods) < 2 {
		return
	}
	var opened []*NewNode
	base := len(p.s.Nodes)
	keep := false
	_ = p.s.WithFork(func() (bool, error) {
		for _, pod := range pods {
			p.s.RemovePod(pod)
		}
		for _, nn := range olds {
			p.retire(nn.Node)
		}
		p.podsRemoved()
		rest := pods
		var cost float64
		for len(rest) > 0 && cost < old-minSaving {
			t, o := p.bestRate(rest, weight)
			if t == nil {
				return false, nil
			}
			n := p.plannedNode(t, []*snapshot.Option{o}, len(opened)+1)
			p.s.AddNode(n)
			left := rest[:0:0]
			for _, pod := range rest {
				if n.FitsOption(o, pod.Class.RequestsOn(n), pod.Class.PodsOn(n)) && !predicates.Run(p.in.Filters, p.s, pod.Class, n).Failed() {
					p.s.AddPod(pod, n)
				} else {
					left = append(left, pod)
				}
			}
			if len(left) == len(rest) {
				return false, nil
			}
			opened = append(opened, &NewNode{Node: n, Template: t})
			cost += o.Price
			rest = left
		}
		keep = len(rest) == 0 && cost < old-minSaving && p.holds()
		return keep, nil
	})
	if !keep {
		p.forgetNodesFrom(base)
		return
	}
	p.replaced(olds, opened)
}

// repackAll tries repack on every planned node, every pair of them, and
// all of them together when there are at most mergeWindow (pods that pair
// well across three nodes, say two kinds that each fill half a node of
// another type, are re-dealt only by the whole).
func (p *packer) repackAll() {
	for i := 0; i < len(p.res.NewNodes); i++ {
		p.repack(p.res.NewNodes[i])
	}
	for i := 0; i < len(p.res.NewNodes); i++ {
		for j := i + 1; j < len(p.res.NewNodes); j++ {
			p.repack(p.res.NewNodes[i], p.res.NewNodes[j])
		}
	}
	var live []*NewNode
	for _, nn := range p.res.NewNodes {
		if !nn.Node.Unschedulable && len(nn.Node.Pods) > 0 {
			live = append(live, nn)
		}
	}
	if len(live) > 2 && len(live) <= mergeWindow {
		p.repack(live...)
	}
}

// bestRate is the template and option, of weight at least minWeight, with
// the lowest price per pod of pods it would hold when filled first-fit by
// requests, counting only pods that pass the filters on the template (a
// tainted template holds none of the pods that do not tolerate it).
func (p *packer) bestRate(pods []*snapshot.Pod, minWeight int32) (*Template, *snapshot.Option) {
	var (
		bestT *Template
		bestO *snapshot.Option
		rate  = math.Inf(1)
	)
	for _, t := range p.in.Templates {
		if t.Weight < minWeight || !p.s.TemplateAvailable(t.Node) {
			continue
		}
		opts, _ := p.in.Launcher.Allowed(p.s, t)
		passes := map[*snapshot.Class]bool{}
		for _, pod := range pods {
			if _, seen := passes[pod.Class]; !seen {
				passes[pod.Class] = !predicates.Run(p.in.Filters, p.s, pod.Class, t.Node).Failed()
			}
		}
		for _, o := range opts {
			free, slots := o.Free()
			free = free.Clone() // Free's extended resources are the option's own
			held, used := 0, 0
			// Pods of one class compete for the option's devices:
			// at most DeviceUnits of them are held.
			devices := map[*snapshot.Class]float64{}
			for _, pod := range pods {
				if used+1+pod.Class.AddOnPods <= slots && passes[pod.Class] && snapshot.Fits(&pod.Class.Requests, &snapshot.Resources{}, &free) && p.matchesOption(o, pod.Class) &&
					devices[pod.Class] < p.s.DeviceUnits(o, pod.Class) {
					free.Sub(&pod.Class.Requests)
					devices[pod.Class]++
					held++
					used += 1 + pod.Class.AddOnPods
				}
			}
			if held > 0 && o.Price/float64(held) < rate {
				bestT, bestO, rate = t, o, o.Price/float64(held)
			}
		}
	}
	return bestT, bestO
}
