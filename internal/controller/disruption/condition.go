package disruption

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// Reasons of the BerthDisruption node condition besides the disruption
// reasons and the rules that block a removal.
const (
	conditionDraining  = "Draining"
	conditionReplacing = "Replacing"
	conditionRemovable = "Removable"
	conditionNeeded    = "Needed"
	conditionLaunching = "Launching"
)

// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch

// conditions keeps the BerthDisruption condition of each of berth's nodes
// current: what berth is doing to it, or why it stays, in words a user can
// act on (`kubectl describe node`). Only a change is written, as a
// strategic merge patch of that one condition (the kubelet's conditions
// are never overwritten). A failed write is retried next round.
func (c *Controller) conditions(ctx context.Context, w *world, plan *scaledown.Plan) {
	want := map[string]corev1.NodeCondition{}
	set := func(node, status, reason, msg string) {
		want[node] = corev1.NodeCondition{Type: v1alpha1.NodeConditionDisruption, Status: corev1.ConditionStatus(status), Reason: reason, Message: msg}
	}
	for _, b := range plan.Blocked {
		set(b.Node, "False", string(b.Reason), b.Message)
	}
	for _, r := range plan.Remove {
		set(r.Node, "True", conditionRemovable, fmt.Sprintf("%s: berth removes it once it has been removable for its group's consolidateAfter", r.Reason))
	}
	for _, r := range plan.Replace {
		for _, name := range r.Nodes {
			set(name, "True", conditionRemovable, fmt.Sprintf("replaceable by one cheaper node (%s, %.4f/h for %.4f/h)", r.New.InstanceType, r.NewPrice, r.OldPrice))
		}
	}
	for _, d := range plan.Disruptions {
		set(d.Node, "True", string(d.Reason), d.Message)
	}
	for _, n := range w.nodes {
		g := w.groups[n.Labels[v1alpha1.LabelNodeGroup]]
		if !owns(g, n) || n.DeletionTimestamp != nil {
			continue
		}
		switch {
		case nodeutil.Disrupted(n):
			why := n.Annotations[v1alpha1.AnnotationDisruptionReason]
			if why == "" {
				why = "scale-down"
			}
			set(n.Name, "True", conditionDraining, "berth is draining the node ("+why+") since "+n.Annotations[v1alpha1.AnnotationDisruptionStarted])
		case n.Annotations[v1alpha1.AnnotationReplacedBy] != "":
			set(n.Name, "True", conditionReplacing, "berth launched "+strings.ReplaceAll(n.Annotations[v1alpha1.AnnotationReplacedBy], ",", ", ")+
				" to replace the node; it is drained once they are Ready")
		case n.Labels[v1alpha1.LabelInitialized] != "true":
			set(n.Name, "False", conditionLaunching, "the node has not been Ready yet")
		}
		if _, ok := want[n.Name]; !ok {
			set(n.Name, "False", conditionNeeded, "the node's pods (or headroom) need it")
		}
		c.writeCondition(ctx, w, n, want[n.Name])
	}
}

// writeCondition patches the node's condition when it changed.
func (c *Controller) writeCondition(ctx context.Context, w *world, n *corev1.Node, cond corev1.NodeCondition) {
	for _, have := range n.Status.Conditions {
		if have.Type == cond.Type && have.Status == cond.Status && have.Reason == cond.Reason && have.Message == cond.Message {
			return
		}
	}
	now := metav1.NewTime(c.Clock.Now())
	cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
	for _, have := range n.Status.Conditions {
		if have.Type == cond.Type && have.Status == cond.Status {
			cond.LastTransitionTime = have.LastTransitionTime
		}
	}
	n = w.own(n)
	patch := client.StrategicMergeFrom(n.DeepCopy())
	kept := n.Status.Conditions[:0:0]
	for _, have := range n.Status.Conditions {
		if have.Type != cond.Type {
			kept = append(kept, have)
		}
	}
	n.Status.Conditions = append(kept, cond)
	if err := c.Client.Status().Patch(ctx, n, patch); err != nil {
		log.FromContext(ctx).V(1).Info("could not write the node's disruption condition; retrying next round", "node", n.Name, "error", err.Error())
	}
}
