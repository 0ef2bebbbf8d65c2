package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// nodeFacts are what explainNode reads: the node, its group, and the
// scale-down plan of the whole cluster.
type nodeFacts struct {
	node *corev1.Node
	// group is the NodeGroup the node's label names; nil when none does.
	group *v1alpha1.NodeGroup
	// replaces are the nodes whose berth.dev/replaced-by names this node.
	replaces []string
	// replacing is a node being replaced now (berth.dev/replaced-by), if any.
	replacing string
	plan      *scaledown.Plan
	now       time.Time
}

// explainNode says what berth decides for the node, and why.
func explainNode(f nodeFacts) Explanation {
	n, g := f.node, f.group
	e := Explanation{Kind: "Node", Name: n.Name, NodeGroup: n.Labels[v1alpha1.LabelNodeGroup]}
	switch {
	case e.NodeGroup == "":
		e.Decision, e.Reason = DecisionNotManaged, ReasonNoNodeGroup
		e.Message = "node " + n.Name + " belongs to no berth NodeGroup (no label " + v1alpha1.LabelNodeGroup + "): berth does not manage it"
	case g == nil:
		e.Decision, e.Reason = DecisionNotManaged, ReasonNodeGroupMissing
		e.Message = "node group " + e.NodeGroup + " does not exist: berth does not manage node " + n.Name
	case n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(g.UID):
		e.Decision, e.Reason = DecisionNotManaged, string(scaledown.ReasonNotOwned)
		e.Message = "node " + n.Name + " does not carry node group " + g.Name + "'s owner mark (" + v1alpha1.AnnotationLaunchedBy +
			"): berth did not launch it for this group and never removes it"
	case n.DeletionTimestamp != nil:
		e.Decision, e.Reason = DecisionDeleting, ReasonDeleting
		e.Message = "node " + n.Name + " is being deleted"
	case n.Annotations[v1alpha1.AnnotationRemovalAccepted] != "":
		e.Decision, e.Reason = DecisionDeleting, ReasonRemovalAccepted
		e.Message = "node " + n.Name + "'s provider accepted removing it" + since(n.Annotations[v1alpha1.AnnotationRemovalAccepted]) +
			": its drain is over and is not undone; berth asks the provider again every minute until the node is gone"
	case nodeutil.Disrupted(n):
		e.Decision, e.Reason = DecisionDraining, n.Annotations[v1alpha1.AnnotationDisruptionReason]
		e.Message = "berth is draining node " + n.Name + since(n.Annotations[v1alpha1.AnnotationDisruptionStarted]) +
			": its pods are evicted through the Eviction API, then the node is deleted"
		if v := lifecycle.Interrupted(g, n, f.now); v != nil {
			e.Hints = []string{fmt.Sprintf("the node is interrupted (%s): berth evicts its pods until %s and then removes it with whatever is left on it; "+
				"neither %s nor the drain timeout holds an interrupted node", v.Message, v.Deadline.UTC().Format(time.RFC3339), v1alpha1.AnnotationDoNotDisrupt)}
		} else {
			e.Hints = []string{fmt.Sprintf("annotating one of its pods %s: \"true\" stops the drain (the rules are checked again before every eviction); "+
				"berth gives up after the group's drainTimeout (%s)", v1alpha1.AnnotationDoNotDisrupt, g.Spec.Disruption.Timeout())}
		}
	case n.Annotations[v1alpha1.AnnotationReplacedBy] != "":
		by := n.Annotations[v1alpha1.AnnotationReplacedBy]
		e.Decision, e.Reason = DecisionReplacing, n.Annotations[v1alpha1.AnnotationDisruptionReason]
		e.Message = "berth launched node " + by + " to replace node " + n.Name + since(n.Annotations[v1alpha1.AnnotationReplacementStarted]) +
			": it drains this node once " + by + " is Ready"
	default:
		fromPlan(&e, f)
	}
	e.Live = nodeLive(f)
	e.Notes = nodeNotes(e, f)
	return e
}

// fromPlan reads the node's place in the scale-down plan, or says why the
// planner does not consider it.
func fromPlan(e *Explanation, f nodeFacts) {
	n, g, p := f.node, f.group, f.plan
	for _, d := range p.Disruptions {
		if d.Node != n.Name {
			continue
		}
		e.Decision, e.Reason, e.Launch = DecisionDisrupt, string(d.Reason), launchesOf(d.Launch)
		e.Message = "node " + n.Name + " is " + string(d.Reason) + ": " + d.Message + "; berth drains it"
		if len(d.Launch) > 0 {
			e.Message += fmt.Sprintf(" after launching %d node(s) for the pods that fit nowhere else", len(d.Launch))
		}
		if d.Deadline != nil {
			e.Message += "; it goes at " + d.Deadline.UTC().Format(time.RFC3339) + " whatever berth does"
		}
		e.Hints = hintList(nodeHint(e.Reason))
		return
	}
	for _, r := range p.Remove {
		if r.Node != n.Name {
			continue
		}
		e.Decision, e.Reason, e.Evict = DecisionRemove, string(r.Reason), movesOf(r.Evict)
		e.Message = "node " + n.Name + " is removable: " + removalWhy(r.Reason)
		e.Hints = hintList(nodeHint(e.Reason))
		return
	}
	for _, r := range p.Replace {
		if !slices.Contains(r.Nodes, n.Name) {
			continue
		}
		e.Decision, e.Reason, e.Launch = DecisionReplace, string(v1alpha1.ReasonUnderutilized), launchesOf([]scaleup.NewNode{r.New})
		e.Message = fmt.Sprintf("nodes %s cost %.4f per hour; their pods fit on the other nodes plus one %s node of node group %s at %.4f per hour: "+
			"berth launches it, then drains them", strings.Join(r.Nodes, ", "), r.OldPrice, r.New.InstanceType, r.New.NodeGroup, r.NewPrice)
		e.Hints = []string{"to keep them: raise the group's spec.disruption.replaceSavingsPercent, or annotate a node berth.dev/do-not-disrupt: \"true\""}
		return
	}
	for _, b := range p.Blocked {
		if b.Node != n.Name {
			continue
		}
		e.Decision, e.Reason, e.Message = DecisionKeep, string(b.Reason), "node "+n.Name+" stays: "+b.Message
		if b.Pod != nil {
			e.Pod = b.Pod.String()
		}
		e.Hints = hintList(nodeHint(e.Reason))
		return
	}
	e.Decision = DecisionKeep
	switch {
	case len(f.replaces) > 0:
		e.Reason = ReasonReplacement
		e.Message = "node " + n.Name + " was launched to replace " + strings.Join(f.replaces, ", ") + ": it stays while they are there"
	case nodeutil.Standby(n):
		e.Reason = ReasonStandby
		owner := n.Annotations[v1alpha1.AnnotationStandbyFor]
		what := "Headroom " + owner
		if strings.Contains(owner, "/") {
			what = "CapacityBuffer " + owner
		}
		state := "booting, to be suspended"
		if nodeutil.Suspended(n) {
			state = "suspended since " + n.Annotations[v1alpha1.AnnotationSuspendedAt]
		}
		e.Message = "node " + n.Name + " is a standby node of " + what + " (" + state + "): the standby controller keeps it, " +
			"berth resumes it when pods need a node, and deletes it only when the units it holds are not needed"
	case n.Labels[v1alpha1.LabelInitialized] != "true" || !nodeutil.Ready(n):
		e.Reason = ReasonNotReady
		e.Message = "node " + n.Name + " is launching or not Ready: scale-down considers only Ready nodes berth has seen Ready once (label " +
			v1alpha1.LabelInitialized + ")"
	case g.Spec.Disruption.Policy() == v1alpha1.ConsolidationNever:
		e.Reason = string(scaledown.ReasonPolicy)
		e.Message = "node group " + g.Name + "'s consolidationPolicy is Never: berth removes none of its nodes"
	default:
		e.Message = "scale-down does not consider node " + n.Name + " now"
	}
	e.Hints = hintList(nodeHint(e.Reason))
}

// removalWhy says why a removable node goes.
func removalWhy(r scaledown.RemovalReason) string {
	switch r {
	case scaledown.RemovalEmpty:
		return "no pod on it needs a new home"
	case scaledown.RemovalNodeGroupDeleted:
		return "its node group is being deleted (deletionPolicy Drain); its pods wait for a node of another group if they fit nowhere"
	}
	return "its pods fit on the other nodes; berth evicts them and removes the node"
}

// nodeLive is what the controller shows on the node and its group.
func nodeLive(f nodeFacts) []string {
	n := f.node
	var out []string
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintDisrupted || t.Key == v1alpha1.TaintInterruption {
			out = append(out, "taint "+t.ToString())
		}
	}
	for _, a := range append([]string{v1alpha1.AnnotationDisruptionStarted, v1alpha1.AnnotationDisruptionReason,
		v1alpha1.AnnotationReplacedBy, v1alpha1.AnnotationReplacementStarted, v1alpha1.AnnotationReplacementLaunching, v1alpha1.AnnotationRemovalWaiting,
		v1alpha1.AnnotationDrainEmptied, v1alpha1.AnnotationDrainCriticalTurn, v1alpha1.AnnotationDrainVolumesWaited, v1alpha1.AnnotationDrainDeletionDelayed, v1alpha1.AnnotationDrainGivenUp,
		v1alpha1.AnnotationRemovalAccepted, v1alpha1.AnnotationInterruptionDeadline}, scaledown.NodeOptOutAnnotations()...) {
		if v, ok := n.Annotations[a]; ok {
			out = append(out, "annotation "+a+": "+v)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1alpha1.NodeConditionDisruption {
			out = append(out, fmt.Sprintf("condition %s=%s (%s): %s, since %s ago", c.Type, c.Status, c.Reason, c.Message, ago(f.now, c.LastTransitionTime.Time)))
		}
	}
	if g := f.group; g != nil {
		for _, t := range []string{v1alpha1.ConditionScaleDownSuspended, v1alpha1.ConditionLaunchFailing} {
			if c := meta.FindStatusCondition(g.Status.Conditions, t); c != nil && c.Status == "True" {
				out = append(out, fmt.Sprintf("node group %s: condition %s=True (%s): %s", g.Name, t, c.Reason, c.Message))
			}
		}
	}
	return out
}

// since says " (since T)" for an RFC 3339 annotation, or nothing.
func since(at string) string {
	if at == "" {
		return ""
	}
	return " (since " + at + ")"
}

func hintList(h string) []string {
	if h == "" {
		return nil
	}
	return []string{h}
}
