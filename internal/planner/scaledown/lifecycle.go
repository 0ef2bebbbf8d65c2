package scaledown

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Disruption is a node whose life takes it out (interruption, drift,
// expiry, repair), through the same path as a removal: the nodes to
// launch first for the pods that fit nowhere else, then the drain.
type Disruption struct {
	Node      string                    `json:"node"`
	NodeGroup string                    `json:"nodeGroup"`
	Reason    v1alpha1.DisruptionReason `json:"reason"`
	// Deadline is when the node goes whatever berth does (Interrupted).
	Deadline *time.Time `json:"deadline,omitempty"`
	Message  string     `json:"message"`
	// Launch are the nodes to launch first; none when the node's pods fit
	// on the other nodes.
	Launch []scaleup.NewNode `json:"launch,omitempty"`
}

// ReasonUnplaceable is the reason of a drifted, expired or unhealthy node
// whose pods fit on no other node and no node can be launched for them.
const ReasonUnplaceable drain.Reason = "NoReplacement"

// ReasonRepairHeld is the reason of an unhealthy node its group does not
// repair: more of its nodes are unhealthy than it repairs at once
// (lifecycle.RepairHold).
const ReasonRepairHeld drain.Reason = "RepairHeld"

// disruptions plans the nodes whose life takes them out, before any
// scale-down: interruptions first (the cloud does not wait; they count
// against the group's budget but are never held by it, nor by drain
// rules: the node goes anyway), then repairs, drift and expiry (within
// their budgets, drain rules apply). A node whose pods all fit elsewhere
// is drained at once; otherwise its replacements are planned (the
// offering of a node whose interruption takes its capacity avoided:
// lifecycle.TakesCapacity).
func (p *planner) disruptions(in Input) error {
	type hold struct {
		held             bool
		failing, allowed int
	}
	holds := map[string]hold{}
	byGroup := map[string][]*corev1.Node{}
	nodes := make([]*corev1.Node, 0, len(p.s.Nodes))
	for _, n := range p.s.Nodes {
		nodes = append(nodes, n.Node)
		if !nodeutil.Standby(n.Node) { // suspended by design: not unhealthy
			byGroup[n.NodeGroup] = append(byGroup[n.NodeGroup], n.Node)
		}
	}
	for name, g := range p.groups {
		var h hold
		h.held, h.failing, h.allowed = lifecycle.RepairHold(g, byGroup[name], in.LaunchGrace)
		holds[name] = h
	}
	clusterHeld, notReady, clusterAllowed := lifecycle.ClusterRepairHold(p.groups, nodes, in.LaunchGrace)
	type due struct {
		node     *snapshot.Node
		group    *v1alpha1.NodeGroup
		verdicts []*lifecycle.Verdict
		empty    bool // no pod to move (DaemonSets' and mirror pods aside)
	}
	var all []due
	for _, n := range p.s.Nodes {
		g := p.groups[n.NodeGroup]
		if g == nil || n.DeletionTimestamp != nil || nodeutil.Disrupted(n.Node) || nodeutil.Standby(n.Node) ||
			n.Annotations[v1alpha1.AnnotationReplacedBy] != "" || n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(g.UID) {
			continue
		}
		if g.DeletionTimestamp != nil {
			// Its group's removal takes the node within the group's budget,
			// but a notice does not wait for that (an orphaned group's
			// nodes are no longer berth's).
			if v := lifecycle.Interrupted(g, n.Node, in.Now); v != nil && retiring(g) {
				all = append(all, due{node: n, group: g, verdicts: []*lifecycle.Verdict{v}})
			}
			continue
		}
		h := holds[g.Name]
		if vs := lifecycle.Verdicts(g, n.Node, in.Now, in.LaunchGrace, h.held || clusterHeld); len(vs) > 0 {
			movers, _, _ := p.classify(n, g)
			all = append(all, due{node: n, group: g, verdicts: vs, empty: len(movers) == 0})
		} else if v := lifecycle.Unhealthy(g, n.Node, in.Now, in.LaunchGrace); v != nil && clusterHeld && !h.held {
			p.block(n, g, ReasonRepairHeld, nil, fmt.Sprintf("node %s is Unhealthy (%s) but stays: %d of the nodes of the groups that repair fail a repair condition now, "+
				"more than are repaired at once (%d, %d %%): a partition is not a repair", n.Name, v.Message, notReady, clusterAllowed, lifecycle.DefaultMaxUnhealthyPercent))
		} else if v := lifecycle.Unhealthy(g, n.Node, in.Now, in.LaunchGrace); v != nil && h.held {
			p.block(n, g, ReasonRepairHeld, nil, fmt.Sprintf("node %s is Unhealthy (%s) but stays: %d of node group %s's %d nodes are unhealthy now, "+
				"more than it repairs at once (%d, spec.disruption.repair.maxUnhealthyPercent): a partition is not a repair",
				n.Name, v.Message, h.failing, g.Name, len(byGroup[g.Name]), h.allowed))
		}
	}
	// Each node's reasons, by reason, then empty nodes first (as
	// Karpenter's drift: they go at no cost, and a pod moved off a
	// drifted node does not land on an empty drifted node, to move again
	// at its turn), then oldest first (by creationTimestamp), then by
	// name: a budget goes to the oldest nodes, not to the names that sort
	// first. A node goes for the first of its
	// reasons whose budget has room when its turn comes (a Drifted budget
	// of 0 does not stop its expiry), and is held, saying so, by its last
	// when none has.
	type turn struct {
		due
		verdict *lifecycle.Verdict
		last    bool
	}
	var turns []turn
	for _, d := range all {
		for i, v := range d.verdicts {
			turns = append(turns, turn{due: d, verdict: v, last: i == len(d.verdicts)-1})
		}
	}
	rank := map[v1alpha1.DisruptionReason]int{v1alpha1.ReasonInterrupted: 0, v1alpha1.ReasonUnhealthy: 1, v1alpha1.ReasonDrifted: 2, v1alpha1.ReasonExpired: 3}
	slices.SortStableFunc(turns, func(a, b turn) int {
		return cmp.Or(cmp.Compare(rank[a.verdict.Reason], rank[b.verdict.Reason]), emptyFirst(a.empty, b.empty),
			a.node.CreationTimestamp.Compare(b.node.CreationTimestamp.Time), cmp.Compare(a.node.Name, b.node.Name))
	})
	done := map[*snapshot.Node]bool{}
	for _, t := range turns {
		if done[t.node] || !t.last && !p.budgetHasRoom(t.group, t.verdict) {
			continue
		}
		done[t.node] = true
		if err := p.disrupt(in, t.node, t.group, t.verdict); err != nil {
			return err
		}
	}
	return nil
}

// budgetHasRoom reports whether the group's budget for the verdict's
// reason allows one more disruption (an interruption is never held).
func (p *planner) budgetHasRoom(g *v1alpha1.NodeGroup, v *lifecycle.Verdict) bool {
	return v.Reason == v1alpha1.ReasonInterrupted || p.inFlight(g, v.Reason) < p.allowed(g, v.Reason)
}

// disrupt plans one node's lifecycle disruption, or reports what holds it.
func (p *planner) disrupt(in Input, n *snapshot.Node, g *v1alpha1.NodeGroup, v *lifecycle.Verdict) error {
	interrupted := v.Reason == v1alpha1.ReasonInterrupted
	name := g.Name
	if !interrupted {
		if v.Reason != v1alpha1.ReasonUnhealthy && (n.Node.Labels[v1alpha1.LabelInitialized] != "true" || p.replacements[n.Name]) {
			return nil // still coming up (a replacement too): drift and expiry wait until it is up
		}
		if pod := p.nominated[n.Name]; pod != nil && v.Reason != v1alpha1.ReasonUnhealthy {
			ref := scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}
			p.block(n, g, ReasonNominated, &ref, "node "+n.Name+" is "+string(v.Reason)+" but stays: pod "+ref.String()+" is not bound yet and is nominated to it")
			return nil
		}
		if why := OptedOut(n.Node); why != "" {
			p.block(n, g, ReasonNodeDoNotDisrupt, nil, "node "+n.Name+" is "+string(v.Reason)+" ("+v.Message+") but stays: it "+why)
			return nil
		}
		if why, ok := p.held[name]; ok { // as for every removal (refuse): the group's bounds may be unknown
			p.block(n, g, ReasonGroupHeld, nil, "node "+n.Name+" is "+string(v.Reason)+" but stays: node group "+name+" holds its removals: "+why)
			return nil
		}
		if why := p.cooling[n.Name]; why != "" { // drained again at once, it would churn its load balancers and pods' room
			p.block(n, g, ReasonRecentlyGivenUp, nil, "node "+n.Name+" is "+string(v.Reason)+" but stays for now: "+why)
			return nil
		}
		if p.inFlight(g, v.Reason) >= p.allowed(g, v.Reason) {
			p.block(n, g, ReasonBudget, nil, "node "+n.Name+" is "+string(v.Reason)+" ("+v.Message+"), but node group "+name+" disrupts as many nodes as its budget for "+string(v.Reason)+" allows"+p.downNote(g, v.Reason))
			return nil
		}
		if _, _, blocked := p.classify(n, g); blocked != nil {
			blocked.Message = "node " + n.Name + " is " + string(v.Reason) + " but stays: " + blocked.Message
			p.plan.Blocked = append(p.plan.Blocked, *blocked)
			return nil
		}
	}
	d := Disruption{Node: n.Name, NodeGroup: name, Reason: v.Reason, Message: v.Message}
	if interrupted {
		deadline := v.Deadline
		d.Deadline = &deadline
	}
	movers, _, blocked := p.classify(n, g)
	if blocked != nil { // interrupted: the cloud takes the node whatever its pods say
		movers = p.returning(n)
	}
	placed := false
	_ = p.s.WithFork(func() (bool, error) {
		_, _, homeless := p.rehome(n, movers)
		placed = homeless == nil
		return placed, nil
	})
	// A group at its minSize gets a node for the one going even when its
	// pods fit elsewhere (the scale-up plan brings it back to minSize).
	atMin := !retiring(g) && p.staying(name) <= int(g.Spec.MinSize)
	if !placed || atMin {
		var avoid []scaleup.Offering
		if lifecycle.TakesCapacity(n.Node, v) {
			l := n.Node.Labels
			avoid = append(avoid, scaleup.Offering{NodeGroup: name, InstanceType: l[v1alpha1.LabelInstanceType], Zone: l[v1alpha1.LabelZone], CapacityType: l[v1alpha1.LabelCapacityType]})
		}
		groups := active(in.NodeGroups)
		if atMin {
			groups = keepingMinSize(groups, name, p.disrupting[name]+p.removed[name])
		}
		plan, err := p.planElsewhere(in, groups, []*snapshot.Node{n}, nil, avoid)
		if err != nil {
			return err
		}
		if len(plan.Unschedulable) > 0 && !interrupted {
			ref := plan.Unschedulable[0].Pod
			p.block(n, g, ReasonUnplaceable, &ref, "node "+n.Name+" is "+string(v.Reason)+" but pod "+ref.String()+" fits nowhere else: "+plan.Unschedulable[0].Message)
			return nil
		}
		d.Launch = plan.NewNodes
		p.s.Cordon(n) // its replacements take its pods; it is no home any more
		p.s.Taint(n, DisruptedTaint())
	}
	p.removed[name]++
	p.plan.Disruptions = append(p.plan.Disruptions, d)
	return nil
}

// returning are the pods of a node the cloud takes that come back and
// need a home: all but those that go with the node (DaemonSet and mirror
// pods, finished ones) and those no controller makes again (the drain
// rules NotReplicated and ControllerExists).
func (p *planner) returning(n *snapshot.Node) []*snapshot.Pod {
	ctx := &drain.Context{Now: p.now, Controllers: p.controllers}
	comesBack := []drain.Rule{drain.GoesWithNode{}, drain.NotReplicated{}, drain.ControllerExists{}}
	var out []*snapshot.Pod
	for _, sp := range n.Pods {
		if !p.placedByPlan(sp) && drain.Check(comesBack, sp.Pod, ctx).Verdict != drain.Moves {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// keepingMinSize is groups with group's minSize raised by leaving, its
// nodes that go (draining, replaced, removed by this plan): the scale-up
// plan counts them among the group's nodes, and would launch nothing for
// the node that goes too while they are there.
func keepingMinSize(groups []*v1alpha1.NodeGroup, group string, leaving int) []*v1alpha1.NodeGroup {
	if leaving <= 0 {
		return groups
	}
	out := slices.Clone(groups)
	for i, g := range out {
		if g.Name == group {
			cp := g.DeepCopy()
			cp.Spec.MinSize += int32(min(leaving, math.MaxInt32-int(cp.Spec.MinSize)))
			cp.Spec.MaxSize = max(cp.Spec.MaxSize, cp.Spec.MinSize)
			out[i] = cp
		}
	}
	return out
}

// emptyFirst orders an empty node before one with pods to move.
func emptyFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
