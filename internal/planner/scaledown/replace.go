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
// cluster plus new nodes; it must place every pod of theirs on exactly one
// new node, saving at least the group's share.
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
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].PricePerHour > (1-savings)*old {
		return nil, nil
	}
	if ok, err := p.onlyHomelessLeft(in, plan); !ok || err != nil {
		return nil, err
	}
	r := &Replacement{New: plan.NewNodes[0], OldPrice: old, NewPrice: plan.NewNodes[0].PricePerHour}
	for _, c := range set {
		r.Nodes = append(r.Nodes, c.node.Name)
	}
	return r, nil
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

// onlyHomelessLeft reports whether every pod the plan leaves unschedulable
// is a waiting pod that fits on no new node of any group, even without
// maxSize, limits or unavailable offerings: the replaced nodes' pods all
// have a home, and no waiting pod left out could take the new node's room
// (kube-scheduler gives it to the waiting pods as soon as the node is
// Ready, before the old nodes are drained). A waiting pod that fits takes
// its room in the plan like the others.
func (p *planner) onlyHomelessLeft(in Input, plan *scaleup.Plan) (bool, error) {
	if len(plan.Unschedulable) == 0 {
		return true, nil
	}
	if p.homeless == nil {
		homeless, err := p.fitNowhere(in)
		if err != nil {
			return false, err
		}
		p.homeless = homeless
	}
	for _, u := range plan.Unschedulable {
		if !p.homeless[u.Pod] {
			return false, nil
		}
	}
	return true, nil
}

// fitNowhere returns the waiting pods that the scale-up planner leaves
// unschedulable on the cluster with every group unbounded (no maxSize, no
// limits, every offering available). It is planned once a round, when a
// replacement first needs it.
func (p *planner) fitNowhere(in Input) (map[scaleup.PodRef]bool, error) {
	groups := make([]*v1alpha1.NodeGroup, 0, len(in.NodeGroups))
	for _, g := range in.NodeGroups {
		open := g.DeepCopy()
		open.Spec.MaxSize, open.Spec.Limits = math.MaxInt32, nil
		groups = append(groups, open)
	}
	unbounded := in
	unbounded.ClusterLimits, unbounded.Unavailable = corev1.ResourceList{}, nil
	plan, err := p.planElsewhere(unbounded, groups, nil, p.waiting, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[scaleup.PodRef]bool, len(plan.Unschedulable))
	for _, u := range plan.Unschedulable {
		out[u.Pod] = true
	}
	return out, nil
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
