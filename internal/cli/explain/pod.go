package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
)

// podFacts are what explainPod reads: the pod, the cluster's nodes, and
// the scale-up plan made with the pod among the pending ones.
type podFacts struct {
	pod *corev1.Pod
	// nodes are the cluster's nodes by name.
	nodes map[string]*corev1.Node
	// groups are the names of the node groups scale-up may launch.
	groups []string
	// plan is the scale-up plan; nil when the pod was not planned.
	plan *scaleup.Plan
	// event is berth's latest scale-up event about the pod, if any.
	event *eventsv1.Event
	now   time.Time
	// awaits is whether the controller plans a node for the pod now
	// (podutil.Burst): the scheduler found none for it, or for another
	// pod of its controller.
	awaits bool
	// booting is whether the Cluster API machines still booting were
	// read (Settings.Cloud): they are among nodes then.
	booting bool
}

// notPlanned says why berth plans no node for the pod at all, or "".
func notPlanned(p *corev1.Pod) (reason, msg string) {
	switch {
	case podutil.IsTerminal(p):
		return ReasonFinished, fmt.Sprintf("the pod has finished (%s): it needs no node", p.Status.Phase)
	case podutil.IsBound(p):
		return "", ""
	case p.DeletionTimestamp != nil:
		return ReasonDeleting, "the pod is being deleted: berth plans no node for it"
	case podutil.IsOwnedByDaemonSet(p):
		return ReasonDaemonSetPod, "a DaemonSet pod belongs to one node: berth never launches a node for it (it counts it on every node it plans)"
	case podutil.IsDaemonSetPod(p):
		return ReasonDaemonSetPod, "the pod is marked " + podutil.AnnotationDaemonSetPod + ": \"true\" (a DaemonSet-like controller's): it belongs to one node, and berth never launches a node for it"
	case !podutil.IsUnbound(p):
		gates := make([]string, 0, len(p.Spec.SchedulingGates))
		for _, g := range p.Spec.SchedulingGates {
			gates = append(gates, g.Name)
		}
		return ReasonSchedulingGated, "the pod is held by scheduling gate(s) " + strings.Join(gates, ", ") +
			": neither the scheduler nor berth plans it until they are removed"
	}
	return "", ""
}

// nominatedTo is the existing node the pod waits for, or "": a pod not
// bound yet and nominated to a node that exists holds room there, and
// berth plans as if it were bound to it.
func nominatedTo(p *corev1.Pod, nodes map[string]*corev1.Node) string {
	if podutil.IsUnbound(p) && nodes[p.Status.NominatedNodeName] != nil {
		return p.Status.NominatedNodeName
	}
	return ""
}

// explainPod says what berth decides for the pod, and why.
func explainPod(f podFacts) Explanation {
	p := f.pod
	e := Explanation{Kind: "Pod", Name: p.Namespace + "/" + p.Name}
	switch reason, msg := notPlanned(p); {
	case reason != "":
		e.Decision, e.Reason, e.Message = DecisionNotPlanned, reason, msg
	case podutil.IsBound(p):
		e.Decision, e.Node = DecisionBound, p.Spec.NodeName
		e.NodeGroup = groupOf(f.nodes[p.Spec.NodeName])
		e.Message = "the pod runs on node " + p.Spec.NodeName + inGroup(e.NodeGroup) + ": it needs no new node"
		e.Hints = []string{"to see whether its node can be removed: berth explain node " + p.Spec.NodeName}
	case nominatedTo(p, f.nodes) != "":
		node := f.nodes[p.Status.NominatedNodeName]
		e.Decision, e.Node, e.NodeGroup = DecisionNominated, node.Name, groupOf(node)
		e.Message = "the pod is nominated to node " + node.Name + inGroup(e.NodeGroup) + " and waits for it: berth counts it there and launches nothing else for it"
		if !nodeutil.Schedulable(node) {
			e.Message += " (the node is not Ready yet)"
		}
	default:
		explainPlanned(&e, f)
		e.Notes = pendingNotes(f.awaits, f.booting)
	}
	e.Live = podLive(f)
	return e
}

// explainPlanned reads the pod's place in the scale-up plan.
func explainPlanned(e *Explanation, f podFacts) {
	ref := scaleup.PodRef{Namespace: f.pod.Namespace, Name: f.pod.Name}
	if f.plan == nil {
		e.Decision, e.Message = DecisionNotPlanned, "the pod was not planned"
		return
	}
	for _, n := range f.plan.NewNodes {
		if !slices.Contains(n.Pods, ref) {
			continue
		}
		e.Decision, e.Reason, e.NodeGroup = DecisionLaunchNode, v1alpha1.EventReasonTriggeredScaleUp, n.NodeGroup
		e.Launch = []Launch{launchOf(n)}
		e.Message = fmt.Sprintf("berth would launch a node of node group %s for this pod: instance type %s in zone %s (%s, %.4f per hour)",
			n.NodeGroup, n.InstanceType, n.Zone, n.CapacityType, n.PricePerHour)
		if others := len(n.Pods) - 1; others > 0 {
			e.Message += fmt.Sprintf(", with %d other pending pod(s)", others)
		}
		if n.Reason == scaleup.ReasonMinSize {
			e.Message += "; the node is launched anyway to reach the group's minSize"
		}
		return
	}
	for _, pl := range f.plan.ExistingNodePlacements {
		if pl.Pod != ref {
			continue
		}
		node := f.nodes[pl.Node]
		e.Decision, e.Node, e.NodeGroup = DecisionFitsExistingNode, pl.Node, groupOf(node)
		e.Message = "the pod fits on node " + pl.Node + inGroup(e.NodeGroup) + ": no new node is needed"
		if node != nil && !nodeutil.Schedulable(node) {
			e.Message += " (the node is being launched: the scheduler binds the pod once it is Ready)"
		} else {
			e.Hints = []string{"if the scheduler keeps refusing it, `kubectl describe pod` shows why; berth's model of that node differs (please report it)"}
		}
		return
	}
	for _, u := range f.plan.Unschedulable {
		if u.Pod != ref {
			continue
		}
		e.Decision, e.Reason, e.Message = DecisionNoNodeGroupFits, v1alpha1.EventReasonNotTriggerScaleUp, "no node and no node group can host the pod: "+u.Message
		e.NodeGroups = groupVerdicts(u.Message, f.groups)
		if head, _, _ := strings.Cut(u.Message, ": "); len(e.NodeGroups) > 0 {
			e.Message = "no node and no node group can host the pod (" + head + ")"
		}
		e.Hints = podHints(e.NodeGroups)
		return
	}
	e.Decision, e.Message = DecisionNotPlanned, "the planner left the pod out of its plan"
}

// groupVerdicts reads the planner's message "0/2 node groups fit: a: r1,
// r2; b: r3" back into one verdict per group. The groups' names tell
// where one group's part starts (a reason may itself contain "; ").
func groupVerdicts(msg string, groups []string) []GroupVerdict {
	_, rest, ok := strings.Cut(msg, " node groups fit: ")
	if !ok {
		return nil
	}
	var out []GroupVerdict
	for _, part := range strings.Split(rest, "; ") {
		name, reason, ok := strings.Cut(part, ": ")
		if ok && slices.Contains(groups, name) {
			out = append(out, GroupVerdict{NodeGroup: name, Reason: reason})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].Reason += "; " + part
		}
	}
	return out
}

// podHints are the hints for the groups' reasons, each once, naming the
// groups it applies to.
func podHints(verdicts []GroupVerdict) []string {
	if len(verdicts) == 0 {
		return []string{"create a NodeGroup whose template, instance types and taints fit the pod"}
	}
	var order []string
	groups := map[string][]string{}
	for _, v := range verdicts {
		h := groupHint(v.Reason)
		if h == "" {
			continue
		}
		if _, seen := groups[h]; !seen {
			order = append(order, h)
		}
		groups[h] = append(groups[h], v.NodeGroup)
	}
	out := make([]string, 0, len(order))
	for _, h := range order {
		out = append(out, strings.Join(groups[h], ", ")+": "+h)
	}
	return out
}

// pendingNotes are what this command cannot see about a pending pod.
// booting: the Cluster API machines still booting were read.
func pendingNotes(awaits, booting bool) []string {
	var out []string
	if !awaits {
		out = append(out, "the scheduler has not reported the pod unschedulable yet: the controller plans it once it has, for the pod or another pod of its controller (it is planned here anyway)")
	}
	unseen := "not visible from outside the controller: its launches of the last seconds not registered as nodes yet, " +
		"offerings that failed after the groups' status.unavailableOfferings was written"
	if !booting {
		unseen += ", Cluster API machines still booting (run with the controller's --clusterapi flags to count them)"
	}
	return append(out, unseen)
}

// podLive is what the controller and the scheduler show on the pod.
func podLive(f podFacts) []string {
	var out []string
	if e := f.event; e != nil {
		out = append(out, fmt.Sprintf("berth's latest event on the pod (%s, %s ago): %s", e.Reason, ago(f.now, podutil.EventTime(e)), e.Note))
	}
	if n := f.pod.Status.NominatedNodeName; n != "" {
		out = append(out, "status.nominatedNodeName: "+n)
	}
	for _, c := range f.pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("condition PodScheduled=%s (%s): %s", c.Status, c.Reason, c.Message))
		}
	}
	return out
}

// latestScaleUp is berth's newest scale-up event among evs, or nil.
func latestScaleUp(evs []eventsv1.Event) *eventsv1.Event {
	var best *eventsv1.Event
	for i := range evs {
		e := &evs[i]
		if e.Reason != v1alpha1.EventReasonTriggeredScaleUp && e.Reason != v1alpha1.EventReasonNotTriggerScaleUp {
			continue
		}
		if best == nil || podutil.EventTime(e).After(podutil.EventTime(best)) {
			best = e
		}
	}
	return best
}

func ago(now, t time.Time) time.Duration { return max(now.Sub(t), 0).Round(time.Second) }

func groupOf(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	return n.Labels[v1alpha1.LabelNodeGroup]
}

func inGroup(g string) string {
	if g == "" {
		return ""
	}
	return " (node group " + g + ")"
}
