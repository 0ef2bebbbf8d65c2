package scaledown

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// holdBack says why no replacement is planned when one would be without
// the two rules that hold replacements back: pods that wait for a node
// could take the new node's room before the old nodes' pods move, and a
// group past its maxSize gets none (replaceable). The nodes of the first
// replacement found without them (the largest set first, as replace tries
// them) say so instead of that a pod has no home. It plans at most
// maxReplaced times more, and only in a round where one of the rules
// applies.
func (p *planner) holdBack(in Input, stuck []candidate) error {
	wait := p.waitingThatFit()
	pastMax := false
	for _, g := range in.NodeGroups {
		pastMax = pastMax || p.size[g.Name] > int(g.Spec.MaxSize)
	}
	if !wait && !pastMax {
		return nil
	}
	for k := min(maxReplaced, len(stuck)); k >= 1; k-- {
		r, err := p.tryReplace(in, stuck[:k], in.NodeGroups, nil)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		var why []string
		if g := p.groups[r.New.NodeGroup]; g != nil && p.size[g.Name] > int(g.Spec.MaxSize) {
			why = append(why, fmt.Sprintf("node group %s has %d nodes, past its maxSize %d (a replacement launched before is still there), "+
				"and gets no replacement until it is back within maxSize", g.Name, p.size[g.Name], g.Spec.MaxSize))
		}
		if wait {
			why = append(why, "pods wait for a node and could take the new node's room before these nodes' pods move: "+
				"no replacement is planned while they wait")
		}
		if len(why) == 0 { // found without either rule's help: nothing to say
			return nil
		}
		msg := fmt.Sprintf("one %s node of node group %s (%.4f/h) would replace %s (%.4f/h), but %s",
			r.New.InstanceType, r.New.NodeGroup, r.NewPrice, strings.Join(r.Nodes, ", "), r.OldPrice, strings.Join(why, "; and "))
		for i := range p.plan.Blocked {
			if b := &p.plan.Blocked[i]; b.Reason == ReasonNoHome && slices.Contains(r.Nodes, b.Node) {
				b.Reason, b.Pod, b.Message = ReasonReplacementHeld, nil, msg
			}
		}
		return nil
	}
	return nil
}

// waitingThatFit reports whether a waiting pod could take a new node's
// room: one that fits on a new node of some group (as far as the round
// found out: fitNowhere runs only when a replacement needed it).
func (p *planner) waitingThatFit() bool {
	for _, pod := range p.waiting {
		if !p.homeless[scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}] {
			return true
		}
	}
	return false
}
