package binpack

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// The greedy pass decides one pod at a time: whether to open a node, and
// from which template, by the price per pod-sized share of each option. It
// cannot see that several planned nodes together would be cheaper as one
// node of another instance type, template or zone, for example when a
// DaemonSet's overhead makes small nodes hold one pod each while a bigger
// node holds four at a lower price per pod. improve looks past one step
// after packing: it tries to replace each run of consecutive planned nodes
// by one new node and keeps the change when the plan gets cheaper.

// mergeWindow bounds how many consecutive planned nodes one replacement
// considers, so that the step stays linear in planned nodes.
const mergeWindow = 8

// minSaving is the smallest price drop per hour worth a change: below it
// floating-point noise would reorder equal plans.
const minSaving = 1e-9

// improveMaxPods: improve runs in rounds of at most this many pending
// pods. A trial costs about as much as placing its pods again; in the
// controller's usual rounds (a burst of a few dozen pods) that is well
// under a millisecond, but in rounds of hundreds of pods (BenchmarkPlan)
// even a few failed trials cost 10-20 % of the round, and there most
// planned nodes are full, so the greedy plan stands.
const improveMaxPods = 64

// fillRounds bounds how many times fill runs: each kept pass changes
// which planned nodes are the donors (the largest), so fill runs again
// while a pass keeps moves, at most this many times, as each costs about
// a quarter of a plan's time. BenchmarkPlan keeps all three at 1,000 pods
// and two at 5,000 (1.107 -> 1.100 and 1.057 -> 1.052 times the lower
// bound); a fourth at 1,000 pods keeps nothing.
const fillRounds = 3

// balanceRounds bounds how many times balance and stepDown run in turn:
// the room a pass of moves leaves lets the next trades pay, until a pass
// keeps nothing. BenchmarkPlan at 5,000 pods: 1.052 times the lower bound
// after one, 1.048 after up to three.
const balanceRounds = 3

// improve moves and trades pods between planned nodes in every round
// (fill, stepDown, balance); in small rounds it also replaces runs of
// planned nodes by cheaper single nodes, then dissolves partly empty
// nodes whose pods are cheaper elsewhere.
func (p *packer) improve() {
	p.oneWeight = p.sameWeight()
	for range fillRounds {
		if !p.fill() {
			break
		}
	}
	p.stepDown()
	for range balanceRounds {
		if !p.balance() {
			break
		}
		p.stepDown() // the trades leave room the moves may use
	}
	if len(p.pending) > improveMaxPods {
		p.settle()
		return
	}
	p.mergeRuns()
	for i := 0; i < len(p.res.NewNodes); i++ {
		p.dissolve(p.res.NewNodes[i])
	}
	p.repackAll()
	p.mergeRuns() // nodes opened by dissolve and split may merge
	if !p.trial {
		p.search()
	}
	p.settle()
}

// mergeRuns replaces each run of planned nodes that costs more than one
// node holding its pods.
func (p *packer) mergeRuns() {
	for i := 0; i < len(p.res.NewNodes); i++ {
		if run := p.runFrom(i); len(run) > 0 {
			p.replaceRun(run)
		}
	}
}

// runFrom returns up to mergeWindow live planned nodes from index i on (nodes
// opened for a group's minSize stay as they are).
func (p *packer) runFrom(i int) []*NewNode {
	var out []*NewNode
	for _, nn := range p.res.NewNodes[i:] {
		if len(out) == mergeWindow {
			break
		}
		if nn.Initial || nn.Node.Unschedulable || len(nn.Node.Pods) == 0 {
			if len(out) == 0 {
				return nil
			}
			continue
		}
		out = append(out, nn)
	}
	return out
}

// replacement is one way to replace the first k nodes of a run.
type replacement struct {
	t      *Template
	k      int
	saving float64
}

// replaceRun finds, over the templates, the prefix of run whose pods fit
// one new node that costs less than the prefix, the one saving most, and
// applies it.
func (p *packer) replaceRun(run []*NewNode) {
	best := replacement{}
	for _, t := range p.in.Templates {
		// A group's weight outranks price: never trade a node for one of a
		// lower-weight group.
		if !p.s.TemplateAvailable(t.Node) || outranked(t, run) || !p.mayPay(t, run) {
			continue
		}
		if r := p.tryTemplate(t, run, false); r.saving > best.saving {
			best = r
		}
	}
	if best.k > 0 {
		p.tryTemplate(best.t, run[:best.k], true)
	}
}

// outranked reports whether a node of run comes from a group weighing more
// than t's.
func outranked(t *Template, run []*NewNode) bool {
	for _, nn := range run {
		if nn.Template.Weight > t.Weight {
			return true
		}
	}
	return false
}

// mayPay is a cheap bound: whether some prefix of run has requests that
// fit an option of t priced below the prefix, ignoring every filter but
// resources. Most runs fail it, and are never simulated.
func (p *packer) mayPay(t *Template, run []*NewNode) bool {
	opts, _ := p.in.Launcher.Allowed(p.s, t)
	var (
		sum  snapshot.Resources
		old  float64
		pods int
	)
	for _, nn := range run {
		sum.Add(&nn.Node.Requested)
		old += nn.Node.Current.Price
		pods += nn.Node.PodCount()
		for _, o := range opts {
			if o.Price < old-minSaving && fitsEmpty(o, &sum, pods) {
				return true
			}
		}
	}
	return false
}

// fitsEmpty reports whether pods pods requesting r in all fit an empty
// node of option o, next to its DaemonSet overhead.
func fitsEmpty(o *snapshot.Option, r *snapshot.Resources, pods int) bool {
	free, slots := o.Free()
	return pods <= slots && snapshot.Fits(r, &snapshot.Resources{}, &free)
}

// tryTemplate moves the pods of run, node by node, to one new node of
// template t, and returns the prefix that saved most. With keep, it moves
// exactly run and keeps the change; otherwise it reverts.
func (p *packer) tryTemplate(t *Template, run []*NewNode, keep bool) replacement {
	best := replacement{t: t}
	opts, _ := p.in.Launcher.Allowed(p.s, t)
	if len(opts) == 0 {
		return best
	}
	_ = p.s.WithFork(func() (bool, error) {
		n := p.plannedNode(t, opts, 1)
		p.s.AddNode(n)
		var old float64
		for k, nn := range run {
			if !p.moveAll(nn.Node, n) {
				break
			}
			old += nn.Node.Current.Price
			if saving := old - n.Current.Price; saving > best.saving+minSaving {
				best.k, best.saving = k+1, saving
			}
		}
		if keep && best.k == len(run) && p.holds() {
			p.replaced(run, []*NewNode{{Node: n, Template: t}})
			return true, nil
		}
		return false, nil
	})
	return best
}

// moveAll moves every pod of from to the planned node to, if all of them
// pass the filters there, and retires from.
func (p *packer) moveAll(from, to *snapshot.Node) bool {
	pods := slices.Clone(from.Pods)
	for _, pod := range pods {
		p.s.RemovePod(pod)
	}
	p.retire(from)
	p.podsRemoved()
	for _, pod := range pods {
		if predicates.Run(p.in.Filters, p.s, pod.Class, to).Failed() {
			return false
		}
		p.s.AddPod(pod, to)
	}
	return true
}

// plannedNode is a new planned node of template t, not yet in the
// snapshot, named as the nth node after those of the plan.
func (p *packer) plannedNode(t *Template, opts []*snapshot.Option, nth int) *snapshot.Node {
	name := fmt.Sprintf("%s%d", p.in.NamePrefix, p.seq+nth)
	obj := t.Node.DeepCopy()
	obj.Name = name
	obj.Labels[corev1.LabelHostname] = name
	return &snapshot.Node{
		Node: obj, Taints: t.Node.Taints, NodeGroup: t.Group, Planned: true,
		Flex: &snapshot.Flex{Options: opts}, HostPorts: slices.Clone(t.Node.HostPorts),
	}
}

// forgetNodesFrom drops what scanNodes learnt about nodes at index from
// and beyond, after a trial that added them was reverted: the indexes
// will be reused by other nodes.
func (p *packer) forgetNodesFrom(from int) {
	for id, set := range p.unusable {
		p.unusable[id] = set.truncate(from)
		p.cursor[id] = min(p.cursor[id], from)
	}
}

// podsRemoved forgets what scanNodes learnt, after improve took pods off
// nodes: its marks hold only while pods are added (a node too full for a
// class, or a domain its anti-affinity rules out, may take the class once
// a pod has left), and a stale mark would hide a node with room.
func (p *packer) podsRemoved() {
	clear(p.unusable)
	clear(p.cursor)
}

// replaced records a kept change: the nodes old left the plan and the
// nodes opened joined it. Where pods went is read back from the snapshot
// by settle.
func (p *packer) replaced(old, opened []*NewNode) {
	for _, nn := range old {
		delete(p.byNode, nn.Node)
	}
	for _, nn := range opened {
		p.seq++
		p.byNode[nn.Node] = nn
		p.res.NewNodes = append(p.res.NewNodes, nn)
		p.refreshTemplates()
	}
}

// settle drops the retired nodes from the plan and rebuilds the pods of
// every planned node and the placements from the snapshot.
func (p *packer) settle() {
	p.res.NewNodes = slices.DeleteFunc(p.res.NewNodes, func(nn *NewNode) bool { return nn.Node.Unschedulable })
	for _, nn := range p.res.NewNodes {
		nn.Pods = nn.Pods[:0]
		for _, pod := range nn.Node.Pods {
			nn.Pods = append(nn.Pods, pod.Pod)
		}
	}
	at := make(map[*corev1.Pod]*snapshot.Node, len(p.pending))
	for _, pod := range p.pending {
		at[pod.Pod] = pod.Node
	}
	for i := range p.res.Placements {
		if n := at[p.res.Placements[i].Pod]; n != nil {
			p.res.Placements[i].Node = n
		}
	}
}
