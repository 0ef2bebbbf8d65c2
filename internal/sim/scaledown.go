package sim

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// reasonReplacement marks a node launched to replace others.
const reasonReplacement = "replacement"

// maxRemovalsPerRound as the disruption controller's default.
const maxRemovalsPerRound = 10

// scaleDown is one scale-down round, as the disruption controller's: the
// drains under way advance (their pods are evicted and recreated pending
// by their controllers; an empty drained node is removed); a replacement
// that is Ready starts its old nodes' drains; then the planner decides
// what can go, and a node removable for its group's consolidateAfter (in
// its window) starts draining, at most maxRemovalsPerRound at once.
func (e *Engine) scaleDown() {
	for _, n := range e.sortedNodes() {
		switch {
		case n.draining:
			e.advance(n)
		case n.replacedBy != "":
			if r := e.nodes[n.replacedBy]; r == nil {
				n.replacedBy = ""
			} else if r.ready {
				e.drain(n, "replaced")
			}
		}
	}
	plan := e.lastPlan
	if plan == nil || e.dirty || e.timeDependent {
		var err error
		if plan, err = scaledown.Run(e.scaleDownInput()); err != nil {
			e.fail(fmt.Errorf("planning scale-down: %w", err))
			return
		}
		e.lastPlan, e.dirty = plan, false
		e.metrics.scaleDownPlans++
	}
	e.removableSince.Follow(plan, e.now)
	if len(e.removableSince) > 0 {
		// The plan reads the countdown (which node is due, tried first):
		// planned again next round, as the controller does.
		e.dirty = true
	}
	started := 0
	for _, r := range plan.Remove {
		since := e.removableSince[r.Node]
		g := e.groups[r.NodeGroup]
		if started < maxRemovalsPerRound && e.now.Sub(since) >= g.Spec.Disruption.After() && windowOpen(g, e.now) {
			e.drain(e.nodes[r.Node], string(r.Reason))
			started++
		}
	}
	for _, r := range plan.Replace {
		if e.replacing() {
			break // one replacement at a time
		}
		e.replace(r)
	}
}

// nodeObjects are the nodes as the planners see them, by name (the map's
// order would differ from run to run): a node still booting looks as the
// controller sees a launching one.
func (e *Engine) nodeObjects() []*corev1.Node {
	out := make([]*corev1.Node, 0, len(e.nodes))
	for _, n := range e.nodes {
		switch {
		case n.ready:
			out = append(out, n.obj)
		case n.resumedAt.After(n.launchedAt):
			out = append(out, launchingNode(n.obj, n.resumedAt)) // booting again since its resume
		default:
			out = append(out, launchingNode(n.obj, n.launchedAt))
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (e *Engine) scaleDownInput() scaledown.Input {
	in := scaledown.Input{NodeGroups: e.cfg.NodeGroups, DaemonSets: e.cfg.DaemonSets, Limits: e.cfg.Limits,
		Virtual: e.headroom.last, Now: e.now, LaunchGrace: launchGrace, Held: map[string]string{}, Since: e.removableSince}
	in.Nodes = e.nodeObjects()
	for _, p := range e.podList() {
		switch {
		case p.isBound():
			in.Pods = append(in.Pods, p.obj)
		case p.nominated != "":
			cp := p.obj.DeepCopy()
			cp.Status.NominatedNodeName = p.nominated
			in.Nominated = append(in.Nominated, cp)
			// The provisioner's holds (state.Holds): berth brings capacity
			// to this group for a pod that waits; no removal starts there.
			if n := e.nodes[p.nominated]; n != nil {
				in.Held[n.group] = "launching for " + p.key()
			}
		case p.tried:
			cp := p.obj.DeepCopy()
			cp.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
			in.Pending = append(in.Pending, cp)
		}
	}
	return in
}

// drain taints the node and evicts its pods: each is recreated, pending,
// by its controller (a placeholder by its Deployment); a bare pod is gone.
func (e *Engine) drain(n *node, why string) {
	if n == nil || n.draining {
		return
	}
	n.draining = true
	n.obj.Spec.Taints = append(n.obj.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	e.sched.cordon(n.obj.Name)
	delete(e.removableSince, n.obj.Name)
	e.metrics.drains++
	e.dirty = true
	e.logf("drain %s (%s)", n.obj.Name, why)
	e.advance(n)
}

// advance evicts what is left on a draining node, or removes it when
// nothing that must move is left.
func (e *Engine) advance(n *node) {
	left := false
	for _, p := range e.podsOn(n.obj.Name) {
		if isDaemon(p.obj) {
			continue
		}
		left = true
		e.evict(p)
	}
	if !left {
		e.remove(n)
	}
}

// evict takes the pod off its node; its controller recreates it under a
// new name, pending, which the trace's later delete of the pod follows.
func (e *Engine) evict(p *pod) {
	e.logf("evict %s from %s", p.key(), p.obj.Spec.NodeName)
	e.deletePod(p)
	e.metrics.evictions++
	if p.placeholder != "" {
		if x := e.headroomByName(p.placeholder); x != nil {
			e.headroom.placeholders(x, e.headroom.resolved[x.Name])
		}
		return
	}
	if len(p.obj.OwnerReferences) == 0 {
		return // a bare pod is gone for good
	}
	e.podSeq++
	obj := p.obj.DeepCopy()
	obj.Spec.NodeName, obj.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
	base := p.obj.Name
	if i := strings.Index(base, "~"); i >= 0 {
		base = base[:i]
	}
	obj.Name = fmt.Sprintf("%s~%d", base, e.podSeq)
	obj.UID = "sim-" + typesUID(obj.Namespace, obj.Name)
	e.addPod(&pod{obj: obj, created: e.now, trace: p.trace, recreated: true})
}

// remove deletes a drained node.
func (e *Engine) remove(n *node) {
	e.logf("remove %s", n.obj.Name)
	delete(e.nodes, n.obj.Name)
	e.metrics.removed(n, e.now)
	e.sched.rebuild()
	e.dirty = true
}

// replacing reports whether a replacement is under way (one at a time).
func (e *Engine) replacing() bool {
	for _, n := range e.nodes {
		if n.replacedBy != "" {
			return true
		}
	}
	return false
}

// replace launches the cheaper node first and marks the nodes it
// replaces; they drain once it is Ready. Each must have been removable
// for its group's consolidateAfter, in its window.
func (e *Engine) replace(r scaledown.Replacement) {
	for _, name := range r.Nodes {
		since, ok := e.removableSince[name]
		n := e.nodes[name]
		if n == nil || !ok {
			return
		}
		if g := e.groups[n.group]; e.now.Sub(since) < g.Spec.Disruption.After() || !windowOpen(g, e.now) {
			return
		}
	}
	nn := r.New
	nn.Reason = reasonReplacement
	nn.Pods = []scaleup.PodRef{}
	repl := e.launch(nn)
	if repl == nil {
		return
	}
	e.metrics.replacements++
	for _, name := range r.Nodes {
		e.nodes[name].replacedBy = repl.obj.Name
		delete(e.removableSince, name)
	}
}

func (e *Engine) podsOn(node string) []*pod {
	var out []*pod
	for _, p := range e.podList() {
		if p.obj.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}
