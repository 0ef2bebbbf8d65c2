package scaledown

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// maxReplaced bounds how many nodes one replacement takes out.
const maxReplaced = 3

// maxAlone bounds how many more candidates are tried alone once the sets
// of the least-utilised ones found no replacement (each try is a what-if
// plan).
const maxAlone = 8

// replacementSets are the sets of candidates a replacement is looked for
// in, in order: the 3, 2 and 1 least-utilised, then each of the next
// maxAlone alone, so that one node no cheaper node can take (it runs the
// cheapest type already, or a pod pinned to its zone) does not keep every
// other node from being replaced.
func replacementSets(stuck []candidate) [][]candidate {
	var out [][]candidate
	for k := min(maxReplaced, len(stuck)); k >= 1; k-- {
		out = append(out, stuck[:k])
	}
	for i := 1; i < len(stuck) && i <= maxAlone; i++ {
		out = append(out, stuck[i:i+1])
	}
	return out
}

// Replacement is a set of nodes whose pods fit on the other nodes plus one
// new node that costs less than they do together.
type Replacement struct {
	Nodes []string `json:"nodes"`
	// New is the node to launch first, as the scale-up planner chose it.
	New      scaleup.NewNode `json:"new"`
	OldPrice float64         `json:"oldPricePerHour"`
	NewPrice float64         `json:"newPricePerHour"`
}

// replace looks for the cheapest replacement of the first 3, 2 or 1
// candidates (in the candidates' order: counting down first, then least
// utilised) that only lack room (their pods pass every drain rule, and
// they are not removed otherwise: planRemovals), or else of one of the
// next ones alone (replacementSets): their pods are planned by the
// scale-up planner on the rest of the cluster plus new nodes; they must
// go to the nodes that stay or exactly one new node, saving at least the
// group's share, not a spot node when one of them is spot (spotNode), and
// the waiting pods that could take that node's room
// must fit on it with them (tryReplace).
func (p *planner) replace(in Input, cands []candidate) error {
	var stuck, overBudget []candidate
	for _, c := range cands {
		if _, held := p.held[c.group.Name]; held || c.group.Spec.Disruption.Policy() != v1alpha1.ConsolidationWhenEmptyOrUnderutilized {
			continue
		}
		if _, _, blocked := p.classify(c.node, c.group); blocked != nil {
			continue
		}
		switch {
		case p.budgetAllows(c.group, 1, 1):
			stuck = append(stuck, c)
		case p.staying(c.group.Name) >= int(c.group.Spec.MinSize):
			overBudget = append(overBudget, c)
		}
	}
	groups := p.replaceable(active(in.NodeGroups))
	var held *Replacement
	for _, set := range replacementSets(stuck) {
		r, heldBack, err := p.tryReplace(in, set, groups, true)
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
		if held == nil {
			held = heldBack
		}
	}
	if err := p.waitForBudget(in, overBudget, groups); err != nil {
		return err
	}
	return p.holdBack(in, stuck, held)
}

// waitForBudget looks for the replacement of the candidates that only
// their group's budget keeps from one (a removal due this round took it,
// or disruptions are under way), as if the budget allowed it. Their nodes
// then wait for the budget (sayBudgetHeld): their countdown runs, and the
// replacement is due as soon as the budget frees, not a consolidateAfter
// after it. Without it, in a group whose budget is one node (the default
// 10 % of up to 19 nodes), a node a cheaper one would replace lost its
// count in every round an empty node was due, and may never have been
// replaced.
func (p *planner) waitForBudget(in Input, overBudget []candidate, groups []*v1alpha1.NodeGroup) error {
	if len(overBudget) == 0 {
		return nil
	}
	p.budgetAside = true
	defer func() { p.budgetAside = false }()
	for _, set := range replacementSets(overBudget) {
		r, _, err := p.tryReplace(in, set, groups, true)
		if err != nil {
			return err
		}
		if r != nil {
			p.budgetHeld = r
			return nil
		}
	}
	return nil
}

// sayBudgetHeld says, of the nodes of the replacement only the budget
// holds back, that they wait for it (Waits): their entries, NoHome or
// the budget's (whose pods had no home without a new node), name the
// replacement.
func (p *planner) sayBudgetHeld() {
	r := p.budgetHeld
	if r == nil {
		return
	}
	for i := range p.plan.Blocked {
		b := &p.plan.Blocked[i]
		if b.Reason != ReasonNoHome && b.Reason != ReasonBudget || !slices.Contains(r.Nodes, b.Node) {
			continue
		}
		b.Reason, b.Pod, b.Waits = ReasonBudget, nil, true
		b.Message = fmt.Sprintf("one %s node of node group %s (%.4f/h) would replace %s (%.4f/h), but node group %s disrupts as many nodes as its budget allows",
			r.New.InstanceType, r.New.NodeGroup, r.NewPrice, strings.Join(r.Nodes, ", "), r.OldPrice, b.NodeGroup)
	}
}

// budgetAllows reports whether the group may disrupt n more nodes, with
// added new ones of its own coming in their place: its budget allows n,
// and it keeps its minSize (a replacement within the group, one node out
// and one in, keeps the group's size, as lifecycle replacements do).
func (p *planner) budgetAllows(g *v1alpha1.NodeGroup, n, added int) bool {
	name := g.Name
	return p.staying(name)-n+added >= int(g.Spec.MinSize) &&
		(p.budgetAside || p.inFlight(g, v1alpha1.ReasonUnderutilized)+n <= p.allowed(g, v1alpha1.ReasonUnderutilized))
}

// tryReplace plans the pods of set as pending on the cluster without it,
// on new nodes of groups: they must all go to the nodes that stay or one
// new node that saves at least the group's share. With contend, the
// waiting pods that could take that node's room (contenders) are planned
// with them and must land on it too, on a plan of that one new node;
// when they do not, the replacement found without them is returned as
// heldBack.
func (p *planner) tryReplace(in Input, set []candidate, groups []*v1alpha1.NodeGroup, contend bool) (r, heldBack *Replacement, err error) {
	old, savings := 0.0, 1.0
	perGroup := map[string]int{}
	var nodes []*snapshot.Node
	spot := false
	for _, c := range set {
		price, ok := nodePrice(c.group, c.node)
		if !ok {
			return nil, nil, nil
		}
		old += price
		spot = spot || c.node.Node.Labels[v1alpha1.LabelCapacityType] == string(v1alpha1.CapacityTypeSpot)
		savings = min(savings, c.group.Spec.Disruption.Savings())
		perGroup[c.group.Name]++
		nodes = append(nodes, c.node)
	}
	for _, c := range set {
		// The new node may be of the group: its minSize is checked once
		// the new node is known (keepsMinSize).
		if !p.budgetAllows(c.group, perGroup[c.group.Name], 1) {
			return nil, nil, nil
		}
	}
	if cheapestOffering(groups) > (1-savings)*old {
		return nil, nil, nil // no new node could save enough: no what-if plan needed
	}
	refs, movers := p.movers(nodes)
	plan, err := p.planElsewhere(in, groups, nodes, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	nn, ok := oneNewNode(plan, refs)
	if !ok || nn.PricePerHour > (1-savings)*old || spot && spotNode(nn) || !p.keepsMinSize(set, perGroup, nn) {
		return nil, nil, nil
	}
	r = replacement(set, nn, old)
	if !contend || len(p.waiting) == 0 {
		return r, nil, nil
	}
	rivals, err := p.contenders(in, nn.NodeGroup, movers)
	if err != nil {
		return nil, nil, err
	}
	if len(rivals) == 0 {
		return r, nil, nil
	}
	if !mayShareANode(p.groups[nn.NodeGroup], rivals) {
		return nil, r, nil
	}
	plan, err = p.planElsewhere(in, groups, nodes, rivals, nil)
	if err != nil {
		return nil, nil, err
	}
	nn, ok = oneNewNode(plan, refs)
	if !ok || len(plan.NewNodes) != 1 || len(plan.Unschedulable) > 0 || nn.NodeGroup != r.New.NodeGroup || nn.PricePerHour > (1-savings)*old || spot && spotNode(nn) ||
		!p.keepsMinSize(set, perGroup, nn) {
		return nil, r, nil
	}
	return replacement(set, nn, old), nil, nil
}

// keepsMinSize reports whether every group of the set keeps its minSize
// once the set is replaced by nn (counted in its own group).
func (p *planner) keepsMinSize(set []candidate, perGroup map[string]int, nn scaleup.NewNode) bool {
	for _, c := range set {
		added := 0
		if nn.NodeGroup == c.group.Name {
			added = 1
		}
		if !p.budgetAllows(c.group, perGroup[c.group.Name], added) {
			return false
		}
	}
	return true
}

// cheapestOffering is the lowest price of any offering of the groups (a
// replacement, one new node, costs at least that); +Inf when none has a
// price.
func cheapestOffering(groups []*v1alpha1.NodeGroup) float64 {
	low := math.Inf(1)
	for _, g := range groups {
		if g.Spec.MaxSize == 0 {
			continue // no room for a new node
		}
		for i := range g.Spec.InstanceTypes {
			for j := range g.Spec.InstanceTypes[i].Offerings {
				if price, err := g.Spec.InstanceTypes[i].Offerings[j].Price(); err == nil {
					low = min(low, price)
				}
			}
		}
	}
	return low
}

// spotNode reports whether a new node is bought at the spot price. Spot
// nodes are not replaced by spot nodes (Karpenter's spot-to-spot
// consolidation is off by default too): the cheapest spot offering is
// often the one whose nodes were just interrupted, and one exact offering
// (berth launches no fleet of alternatives) is the least likely to last.
func spotNode(nn scaleup.NewNode) bool {
	return nn.CapacityType == string(v1alpha1.CapacityTypeSpot)
}

// replacement is the set's replacement by the new node.
func replacement(set []candidate, nn scaleup.NewNode, old float64) *Replacement {
	r := &Replacement{New: nn, OldPrice: old, NewPrice: nn.PricePerHour}
	for _, c := range set {
		r.Nodes = append(r.Nodes, c.node.Name)
	}
	return r
}

// movers are the pods (and headroom units) that must leave the nodes, by
// reference and as they are.
func (p *planner) movers(nodes []*snapshot.Node) (map[scaleup.PodRef]bool, []*corev1.Pod) {
	refs := map[scaleup.PodRef]bool{}
	var pods []*corev1.Pod
	for _, n := range nodes {
		movers, _, _ := p.classify(n, p.groups[n.NodeGroup])
		for _, sp := range movers {
			refs[scaleup.PodRef{Namespace: sp.Namespace, Name: sp.Name}] = true
			pods = append(pods, sp.Pod)
		}
	}
	return refs, pods
}

// oneNewNode returns the one new node of the plan that the replaced
// nodes' pods go to: every one of them is placed, on a node that stays or
// on that node.
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
		if p.pastMaxSize(g.Name) {
			full := g.DeepCopy()
			full.Spec.MaxSize = 0
			g = full
		}
		out = append(out, g)
	}
	return out
}

// planElsewhere plans, with the scale-up planner, the pods (and headroom
// units) that must leave the given nodes, and the waiting pods given, on
// the cluster without those nodes plus new nodes of groups, without the
// offerings in avoid: what would have to be launched for them. With
// in.WhatIf, the model of the cluster is kept from one what-if to the
// next, across rounds: each changes only the nodes that go or come back
// and what changed in the cluster.
func (p *planner) planElsewhere(in Input, groups []*v1alpha1.NodeGroup, gone []*snapshot.Node, waiting []*corev1.Pod, avoid []scaleup.Offering) (*scaleup.Plan, error) {
	out := map[string]bool{}
	for _, n := range gone {
		out[n.Name] = true
	}
	sin := scaleup.Input{NodeGroups: groups, Pending: slices.Clone(waiting), DaemonSets: in.DaemonSets, Namespaces: in.Namespaces, Claims: in.Claims,
		Volumes: in.Volumes, DRA: in.DRA, Limits: in.Limits, Unavailable: append(slices.Clone(in.Unavailable), avoid...), Base: in.WhatIf,
		Now: in.Now, LaunchGrace: in.LaunchGrace}
	for _, n := range in.Nodes {
		if !out[n.Name] {
			sin.Nodes = append(sin.Nodes, p.asPlanned(n))
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
	_, movers := p.movers(gone)
	for _, pod := range movers {
		sin.Pending = append(sin.Pending, unboundCopy(pod))
	}
	plan, err := scaleup.Run(sin)
	if err != nil {
		return nil, err
	}
	plan.NewNodes = slices.DeleteFunc(plan.NewNodes, func(nn scaleup.NewNode) bool {
		return othersMinSize(nn, gone)
	})
	return plan, nil
}

// othersMinSize reports whether a planned node is one another group
// lacks to reach its minSize, with no pod of the plan on it: the
// provisioner's to launch, not a removal's (the gone nodes' groups' own
// are theirs: a group at its minSize gets a node for the one going).
func othersMinSize(nn scaleup.NewNode, gone []*snapshot.Node) bool {
	return nn.Reason == scaleup.ReasonMinSize && len(nn.Pods) == 0 &&
		!slices.ContainsFunc(gone, func(n *snapshot.Node) bool { return n.NodeGroup == nn.NodeGroup })
}

// asPlanned is n as the plan has it so far: a node the plan takes out
// (drained, replaced, or leaving: cordoned in the snapshot, its pods
// moved) is cordoned and tainted as a drained node, no home for the pods
// planned elsewhere, which would otherwise find it empty.
func (p *planner) asPlanned(n *corev1.Node) *corev1.Node {
	sn := p.s.Node(n.Name)
	if sn == nil || !sn.Unschedulable || n.Spec.Unschedulable {
		return n
	}
	cp := *n
	cp.Spec.Unschedulable = true
	cp.Spec.Taints = append(slices.Clip(n.Spec.Taints), DisruptedTaint()) // as rehome: spreads that honor taints stop counting it
	return &cp
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
