package scaledown

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// holdBack says why no replacement is planned when one would be without
// the two rules that hold replacements back: waiting pods that would take
// the new node's room before the old nodes' pods move (tryReplace's
// contenders) and a group past its maxSize (it gets none: replaceable).
// held is the first replacement the contenders alone held back, if any.
// Else, while a group is past its maxSize, the replacements are planned
// once more in every group (at most maxReplaced+maxAlone plans). The nodes of the
// replacement found say which rules apply to it, instead of that a pod
// has no home.
func (p *planner) holdBack(in Input, stuck []candidate, held *Replacement) error {
	if held != nil {
		p.sayHeld(held, false, true)
		return nil
	}
	if !slices.ContainsFunc(in.NodeGroups, func(g *v1alpha1.NodeGroup) bool { return p.pastMaxSize(g.Name) }) {
		return nil
	}
	for _, set := range replacementSets(stuck) {
		r, heldBack, err := p.tryReplace(in, set, in.NodeGroups, true)
		if err != nil {
			return err
		}
		if r == nil {
			r = heldBack
		}
		if r != nil {
			p.sayHeld(r, p.pastMaxSize(r.New.NodeGroup), heldBack != nil)
			return nil
		}
	}
	return nil
}

// pastMaxSize reports whether the group has more nodes than its maxSize.
func (p *planner) pastMaxSize(group string) bool {
	g := p.groups[group]
	return g != nil && p.size[group] > int(g.Spec.MaxSize)
}

// sayHeld rewrites the NoHome entries of the replacement's nodes to say
// which rules hold it back, if any. No count is in the words: they are an
// event deduplicated by its text and a node condition patched when it
// changes.
func (p *planner) sayHeld(r *Replacement, pastMax, contended bool) {
	var why []string
	if pastMax {
		why = append(why, fmt.Sprintf("node group %s is past its maxSize %d (a replacement under way or given up leaves a node past it, "+
			"as does a lowered maxSize) and gets no replacement until it is back within it", r.New.NodeGroup, p.groups[r.New.NodeGroup].Spec.MaxSize))
	}
	if contended {
		why = append(why, "pods wait for a node of node group "+r.New.NodeGroup+" that would take the new node's room before these nodes' pods move: "+
			"no replacement is planned there while they wait")
	}
	if len(why) == 0 {
		return
	}
	msg := fmt.Sprintf("one %s node of node group %s (%.4f/h) would replace %s (%.4f/h), but %s",
		r.New.InstanceType, r.New.NodeGroup, r.NewPrice, strings.Join(r.Nodes, ", "), r.OldPrice, strings.Join(why, "; and "))
	for i := range p.plan.Blocked {
		if b := &p.plan.Blocked[i]; b.Reason == ReasonNoHome && slices.Contains(r.Nodes, b.Node) {
			b.Reason, b.Pod, b.Message = ReasonReplacementHeld, nil, msg
		}
	}
}
