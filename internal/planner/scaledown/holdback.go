package scaledown

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// holdBack says why no replacement is planned when one would be without
// the two rules that hold replacements back: waiting pods that could take
// the new node's room before the old nodes' pods move (noneCouldTakeItsRoom)
// and a group past its maxSize (it gets none: replaceable). The nodes of
// the first replacement found with both rules lifted (the largest set
// first, as replace tries them) say which of the two apply to it, instead
// of that a pod has no home. It runs only in a round where pods wait or a
// group is past its maxSize, and plans at most maxReplaced times more,
// plus fitIn for the replacement's group if the round had not planned it.
func (p *planner) holdBack(in Input, stuck []candidate) error {
	pastMax := false
	for _, g := range in.NodeGroups {
		pastMax = pastMax || p.size[g.Name] > int(g.Spec.MaxSize)
	}
	if len(p.waiting) == 0 && !pastMax {
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
		why, err := p.heldBy(in, r)
		if err != nil || len(why) == 0 { // found without either rule's help: nothing to say
			return err
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

// heldBy says which of the rules hold the replacement back. No count is
// in the words: they are an event deduplicated by its text and a node
// condition patched when it changes.
func (p *planner) heldBy(in Input, r *Replacement) ([]string, error) {
	var why []string
	if g := p.groups[r.New.NodeGroup]; g != nil && p.size[g.Name] > int(g.Spec.MaxSize) {
		cause := "its maxSize is below its size"
		if p.replacingIn(g.Name) {
			cause = "a replacement launched before is still there"
		}
		why = append(why, fmt.Sprintf("node group %s is past its maxSize %d (%s) and gets no replacement until it is back within it",
			g.Name, g.Spec.MaxSize, cause))
	}
	if len(p.waiting) > 0 {
		fit, err := p.fitIn(in, r.New.NodeGroup)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(p.waiting, func(pod *corev1.Pod) bool { return fit[scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}] }) {
			why = append(why, "pods wait for a node of node group "+r.New.NodeGroup+" and would take the new node's room before these nodes' pods move: "+
				"no replacement is planned there while they wait")
		}
	}
	return why, nil
}

// replacingIn reports whether a node of the group was launched to replace
// others that are still there.
func (p *planner) replacingIn(group string) bool {
	for _, n := range p.s.Nodes {
		if n.NodeGroup == group && p.replacements[n.Name] {
			return true
		}
	}
	return false
}
