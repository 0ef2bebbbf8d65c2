package scaledown

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// maxReplaced bounds how many nodes one replacement takes out.
const maxReplaced = 3

// Replacement is a set of nodes whose pods fit on the other nodes plus one
// new node that costs less than they do together.
type Replacement struct {
	Nodes []string `json:"nodes"`
	// New is the node to launch first, as the scale-up planner chose it.
	New      scaleup.NewNode `json:"new"`
	OldPrice float64         `json:"oldPricePerHour"`
	NewPrice float64         `json:"newPricePerHour"`
}

// replace looks, when nothing could simply be removed, for the cheapest
// replacement of the 3, 2 or 1 least-utilised candidates that only lack
// room (their pods pass every drain rule): their pods, with the pods that
// wait for a node, are planned by the scale-up planner on the rest of the
// cluster plus new nodes; it must place every pod of theirs on the nodes
// that stay or exactly one new node, saving at least the group's share,
// and leave off that node no waiting pod that could take its room.
func (p *planner) replace(in Input, cands []candidate) error {
	var stuck []candidate
	for _, c := range cands {
		if _, held := p.held[c.group.Name]; held || c.group.Spec.Disruption.Policy() != v1alpha1.ConsolidationWhenEmptyOrUnderutilized {
			continue
		}
		if _, _, blocked := p.classify(c.node, c.group); blocked == nil && p.budgetAllows(c.group, 1) {
			stuck = append(stuck, c)
		}
	}
	groups := p.replaceable(in.NodeGroups)
	for k := min(maxReplaced, len(stuck)); k >= 1; k-- {
		set := stuck[:k]
		r, err := p.tryReplace(in, set, groups, p.waiting)
		if err != nil {
			return err
		}
		if r != nil {
			p.plan.Replace = append(p.plan.Replace, *r)
			for _, c := range set {
				p.removed[c.group.Name]++
			}
			return nil
		}
	}
	return p.holdBack(in, stuck)
}

// budgetAllows reports whether the group may disrupt n more nodes.
func (p *planner) budgetAllows(g *v1alpha1.NodeGroup, n int) bool {
	name := g.Name
	return p.size[name]-p.disrupting[name]-p.removed[name]-n >= int(g.Spec.MinSize) &&
		p.disrupting[name]+p.removed[name]+n <= p.allowed(g, v1alpha1.ReasonUnderutilized)
}

// tryReplace plans the pods of set as pending on the cluster without it,
// with the waiting pods given, on new nodes of groups.
func (p *planner) tryReplace(in Input, set []candidate, groups []*v1alpha1.NodeGroup, waiting []*corev1.Pod) (*Replacement, error) {
	old, savings := 0.0, 1.0
	perGroup := map[string]int{}
	for _, c := range set {
		price, ok := nodePrice(c.group, c.node)
		if !ok {
			return nil, nil
		}
		old += price
		savings = min(savings, c.group.Spec.Disruption.Savings())
		perGroup[c.group.Name]++
	}
	for _, c := range set {
		if !p.budgetAllows(c.group, perGroup[c.group.Name]) {
			return nil, nil
		}
	}
	var nodes []*snapshot.Node
	for _, c := range set {
		nodes = append(nodes, c.node)
	}
	plan, err := p.planElsewhere(in, groups, nodes, waiting, nil)
	if err != nil {
		return nil, err
	}
	nn, ok := oneNewNode(plan, p.moverRefs(nodes))
	if !ok || nn.PricePerHour > (1-savings)*old {
		return nil, nil
	}
	if ok, err := p.noneCouldTakeItsRoom(in, plan, nn, waiting); !ok || err != nil {
		return nil, err
	}
	r := &Replacement{New: nn, OldPrice: old, NewPrice: nn.PricePerHour}
	for _, c := range set {
		r.Nodes = append(r.Nodes, c.node.Name)
	}
	return r, nil
}

// moverRefs are the pods (and headroom units) that must leave the nodes.
func (p *planner) moverRefs(nodes []*snapshot.Node) map[scaleup.PodRef]bool {
	out := map[scaleup.PodRef]bool{}
	for _, n := range nodes {
		movers, _, _ := p.classify(n, p.groups[n.NodeGroup])
		for _, sp := range movers {
			out[scaleup.PodRef{Namespace: sp.Namespace, Name: sp.Name}] = true
		}
	}
	return out
}

// oneNewNode returns the one new node of the plan that the replaced
// nodes' pods go to: every one of them is placed, on a node that stays or
// on that node. The plan's other new nodes hold waiting pods only, and are
// scale-up's matter.
func oneNewNode(plan *scaleup.Plan, movers map[scaleup.PodRef]bool) (scaleup.NewNode, bool) {
	for _, u := range plan.Unschedulable {
		if movers[u.Pod] {
			return scaleup.NewNode{}, false
		}
	}
	found := -1
	for i, nn := range plan.NewNodes {
		if !slices.ContainsFunc(nn.Pods, func(r scaleup.PodRef) bool { return movers[r] }) {
			continue
		}
		if found >= 0 {
			return scaleup.NewNode{}, false
		}
		found = i
	}
	if found < 0 {
		return scaleup.NewNode{}, false
	}
	return plan.NewNodes[found], true
}

// replaceable returns the node groups a replacement may be launched in:
// the groups already past their maxSize are copied with no room left. A
// replacement is launched before the nodes it replaces leave (the group
// passes its maxSize by one meanwhile); when it is given up, the replaced
// nodes stay and so does the replacement. Another replacement in that
// group would pass maxSize by one more each time: none is planned there
// until its nodes are back within maxSize, and the planner looks for one
// in the other groups instead.
func (p *planner) replaceable(groups []*v1alpha1.NodeGroup) []*v1alpha1.NodeGroup {
	out := make([]*v1alpha1.NodeGroup, 0, len(groups))
	for _, g := range groups {
		if p.size[g.Name] > int(g.Spec.MaxSize) {
			full := g.DeepCopy()
			full.Spec.MaxSize = 0
			g = full
		}
		out = append(out, g)
	}
	return out
}

// noneCouldTakeItsRoom reports whether no waiting pod that the plan
// leaves off the new node could take its room: kube-scheduler gives that
// room to the waiting pods as soon as the node is Ready, before the
// replaced nodes' pods move. One that fits on a new node of the same
// group, with its maxSize, limits and unavailable offerings lifted, could
// (a pod held back by maxSize alone too); pods that wait for other groups,
// or fit nowhere, hold nothing back.
func (p *planner) noneCouldTakeItsRoom(in Input, plan *scaleup.Plan, nn scaleup.NewNode, waiting []*corev1.Pod) (bool, error) {
	if len(waiting) == 0 {
		return true, nil
	}
	fit, err := p.fitIn(in, nn.NodeGroup)
	if err != nil {
		return false, err
	}
	on := make(map[scaleup.PodRef]bool, len(nn.Pods))
	for _, ref := range nn.Pods {
		on[ref] = true
	}
	for _, pod := range waiting {
		if ref := (scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}); fit[ref] && !on[ref] {
			return false, nil
		}
	}
	return true, nil
}

// fitIn returns the waiting pods that fit on new nodes of the group with
// its maxSize, limits and unavailable offerings lifted: those that could
// take the room of a node launched there. Planned once a round per group,
// when a replacement there first needs it.
func (p *planner) fitIn(in Input, group string) (map[scaleup.PodRef]bool, error) {
	if fit, ok := p.fit[group]; ok {
		return fit, nil
	}
	g := p.groups[group]
	if g == nil {
		return nil, nil
	}
	open := g.DeepCopy()
	open.Spec.MaxSize, open.Spec.Limits = math.MaxInt32, nil
	unbounded := in
	unbounded.ClusterLimits, unbounded.Unavailable = corev1.ResourceList{}, nil
	plan, err := p.planElsewhere(unbounded, []*v1alpha1.NodeGroup{open}, nil, p.waiting, nil)
	if err != nil {
		return nil, err
	}
	fit := map[scaleup.PodRef]bool{}
	for _, nn := range plan.NewNodes {
		for _, ref := range nn.Pods {
			fit[ref] = true
		}
	}
	if p.fit == nil {
		p.fit = map[string]map[scaleup.PodRef]bool{}
	}
	p.fit[group] = fit
	return fit, nil
}

// planElsewhere plans, with the scale-up planner, the pods (and headroom
// units) that must leave the given nodes, and the waiting pods given, on
// the cluster without those nodes plus new nodes of groups, without the
// offerings in avoid: what would have to be launched for them.
func (p *planner) planElsewhere(in Input, groups []*v1alpha1.NodeGroup, gone []*snapshot.Node, waiting []*corev1.Pod, avoid []scaleup.Offering) (*scaleup.Plan, error) {
	out := map[string]bool{}
	for _, n := range gone {
		out[n.Name] = true
	}
	sin := scaleup.Input{NodeGroups: groups, Pending: slices.Clone(waiting), DaemonSets: in.DaemonSets, Namespaces: in.Namespaces, Claims: in.Claims,
		Volumes: in.Volumes, DRA: in.DRA, ClusterLimits: in.ClusterLimits, Unavailable: append(slices.Clone(in.Unavailable), avoid...)}
	for _, n := range in.Nodes {
		if !out[n.Name] {
			sin.Nodes = append(sin.Nodes, n)
		}
	}
	// The cluster's pods as the snapshot holds them (headroom units and
	// settled pods placed as bound pods); the pods and units that must
	// leave become pending, without a node.
	for _, n := range p.s.Nodes {
		if out[n.Name] {
			continue
		}
		for _, sp := range n.Pods {
			sin.Pods = append(sin.Pods, boundTo(sp, n.Name))
		}
	}
	for _, n := range gone {
		movers, _, _ := p.classify(n, p.groups[n.NodeGroup])
		for _, sp := range movers {
			sin.Pending = append(sin.Pending, unboundCopy(sp.Pod))
		}
	}
	return scaleup.Run(sin)
}

// boundTo returns the pod as bound to node (headroom units placed by the
// snapshot carry no node yet).
func boundTo(sp *snapshot.Pod, node string) *corev1.Pod {
	if sp.Spec.NodeName == node {
		return sp.Pod
	}
	cp := *sp.Pod
	cp.Spec.NodeName = node
	return &cp
}

// nodePrice is the price of a node's offering in its group.
func nodePrice(g *v1alpha1.NodeGroup, n *snapshot.Node) (float64, bool) {
	l := n.Node.Labels
	_, o := g.FindOffering(l[v1alpha1.LabelInstanceType], l[v1alpha1.LabelZone], v1alpha1.CapacityType(l[v1alpha1.LabelCapacityType]))
	if o == nil {
		return 0, false
	}
	price, err := o.Price()
	return price, err == nil
}
