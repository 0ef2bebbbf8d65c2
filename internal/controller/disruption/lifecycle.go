package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/state"
)

// Event reasons of lifecycle disruptions, on the node.
const (
	ReasonInterrupted = "Interrupted"
	ReasonDrifted     = "Drifted"
	ReasonExpired     = "Expired"
	ReasonUnhealthy   = "Unhealthy"
)

// Unavailable are the offerings that should not be launched for a while
// (state.Offerings): replacements are planned without them, and an
// interrupted node's offering or one whose replacement launch failed is
// marked.
type Unavailable interface {
	MarkUnavailable(off v1alpha1.OfferingKey, reason, message string)
	Unavailable() []v1alpha1.OfferingKey
}

// disrupt acts on a node whose life takes it out: an interrupted node's
// offering is avoided, its replacements launched and its drain started at
// once (the cloud does not wait); any other reason drains at once when the
// node's pods fit elsewhere, and otherwise launches the replacements first
// and drains once they are Ready (awaitReplacement). Drift and expiry wait
// for the group's window; interruption and repair do not.
func (c *Controller) disrupt(ctx context.Context, w *world, d scaledown.Disruption, res *Result) error {
	n, g := w.byName[d.Node], w.groups[d.NodeGroup]
	if n == nil || g == nil {
		return nil
	}
	if _, ok := c.marks[n.Name]; ok {
		return nil // launched for already; its marks are not confirmed yet (ensureMarks)
	}
	interrupted := d.Reason == v1alpha1.ReasonInterrupted
	if d.WaitsForWindow() && !c.windowOpen(g, c.Clock.Now()) {
		return nil
	}
	if interrupted {
		c.avoidInterrupted(g, n)
	}
	// A replacement may be booting that no mark names (launching): none
	// is launched again; an interrupted node's drain starts all the same.
	intended := c.launching(n)
	if intended && !interrupted {
		return nil
	}
	if !interrupted && len(d.Launch) == 0 && c.paceFull(res) {
		return nil // its drain starts in a later round
	}
	launch := d.Launch
	if intended {
		launch = nil
	}
	if len(launch) > 0 {
		if err := c.intend(ctx, w, []string{n.Name}); err != nil {
			if !interrupted {
				return err
			}
			log.FromContext(ctx).Info("launching the interrupted node's replacements without a record of the launch", "node", n.Name, "error", err.Error())
		}
	}
	var launched []string
	for _, nn := range launch {
		ng := w.groups[nn.NodeGroup]
		if ng == nil {
			continue
		}
		off := cloudprovider.OfferingOf(nn.Offering())
		inst, err := c.Cloud.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: off, Replaces: []string{n.Name}})
		if err != nil {
			c.launchFailed(ctx, ng, nn, off, []string{n.Name}, err)
			if !interrupted && len(launched) > 0 {
				break // what was launched is marked; the drain waits for it, and the node's pods are checked again then
			}
			if !interrupted {
				c.forgetIntent(ctx, w, []string{n.Name}) // nothing launched: the next round plans again
				return nil
			}
			continue
		}
		launched = append(launched, inst.NodeName)
		res.Replacements = append(res.Replacements, inst.NodeName)
		c.Activity.ScaledUp(ng.Name, state.ScaleEvent{Time: c.Clock.Now(), Node: inst.NodeName, Reason: "Replacement",
			Message: fmt.Sprintf("%s, replacing %s (%s)", off, n.Name, d.Reason)})
	}
	if len(launched) == 0 && len(launch) > 0 {
		c.forgetIntent(ctx, w, []string{n.Name}) // an interrupted node whose launches all failed: its drain starts below
	}
	now := c.Clock.Now().UTC().Format(time.RFC3339)
	if len(launched) > 0 && interrupted {
		c.marks[n.Name] = mark{at: c.Clock.Now(), drain: true, annotations: map[string]string{
			v1alpha1.AnnotationDisruptionStarted: now, v1alpha1.AnnotationDisruptionReason: string(d.Reason)}}
	}
	event := map[v1alpha1.DisruptionReason]string{v1alpha1.ReasonInterrupted: ReasonInterrupted, v1alpha1.ReasonDrifted: ReasonDrifted,
		v1alpha1.ReasonExpired: ReasonExpired, v1alpha1.ReasonUnhealthy: ReasonUnhealthy}[d.Reason]
	if len(launched) == 0 || interrupted {
		why := "it is " + string(d.Reason) + ": " + d.Message
		if len(launched) > 0 {
			why += "; replacements " + strings.Join(launched, ", ") + " launched"
		}
		switch {
		case len(launched) > 0:
			c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, event, "Disrupt", "Replacing node: %s; launched %s, the node drains now", d.Message, strings.Join(launched, ", "))
		case len(launch) > 0:
			c.Recorder.Eventf(n, nil, corev1.EventTypeWarning, event, "Disrupt", "Draining node without a replacement (its launches failed): %s", d.Message)
		default:
			c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, event, "Disrupt", "Draining node (its pods fit on other nodes, nothing is launched): %s", d.Message)
		}
		if err := c.start(ctx, w, n, d.Reason, why); err != nil {
			return err
		}
		res.started(n.Name, d.Reason)
		return nil
	}
	m := mark{at: c.Clock.Now(), annotations: map[string]string{v1alpha1.AnnotationReplacedBy: strings.Join(launched, ","),
		v1alpha1.AnnotationReplacementStarted: now, v1alpha1.AnnotationDisruptionReason: string(d.Reason)}}
	c.marks[n.Name] = m
	n = w.own(n)
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	m.apply(n)
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("marking node %s replaced: %w", n.Name, err)
	}
	c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, event, "Disrupt",
		"Replacing node: %s; launched %s first, the node is drained once they are Ready", d.Message, strings.Join(launched, ", "))
	log.FromContext(ctx).Info("replacing node", "node", n.Name, "reason", d.Reason, "replacements", launched)
	return nil
}

// advanceInterrupted moves the drain of a node under an interruption
// notice on: the notice is a deadline, not a reason to break budgets
// early. Until the deadline, the pods that can move are evicted through
// the Eviction API (PodDisruptionBudgets decide the pace) and the node is
// removed once they are gone; the drain is never given up (the node goes
// anyway); at the deadline the node is removed with whatever is left on
// it, as the cloud would.
func (c *Controller) advanceInterrupted(ctx context.Context, w *world, g *v1alpha1.NodeGroup, n *corev1.Node, started, deadline time.Time, res *Result) error {
	if !c.Clock.Now().Before(deadline) {
		c.warnOnce(n, ReasonInterrupted, "The interruption deadline "+deadline.UTC().Format(time.RFC3339)+" passed: removing the node with what is left on it")
		return c.remove(ctx, g, n, started, nil, res)
	}
	pods, err := c.freshPods(ctx, n.Name)
	if err != nil {
		return err
	}
	left := 0
	for _, p := range pods {
		if moves, _ := scaledown.CheckPods(w.input, n.Name, []*corev1.Pod{p}); len(moves) == 0 {
			if _, blocked := scaledown.CheckPods(w.input, n.Name, []*corev1.Pod{p}); blocked != nil {
				left++ // it stays until the deadline; the cloud takes it with the node
			}
			continue
		}
		if cameBack(p, started) {
			continue // it goes with the node (cameBack)
		}
		left++
		if p.DeletionTimestamp == nil {
			c.evict(ctx, p)
		}
	}
	if left > 0 {
		return nil
	}
	// Its volumes detach first (detachWait), up to the deadline.
	if attached, err := c.attachedVolumes(ctx, n.Name, pods); err != nil || len(attached) > 0 {
		c.sayOnce(n, corev1.EventTypeNormal, ReasonAwaitingVolumeDetachment, fmt.Sprintf(
			"The node's pods are gone; its removal waits up to the interruption deadline %s for their volumes to detach: %s",
			deadline.UTC().Format(time.RFC3339), attachedText(attached, err)))
		return nil
	}
	return c.remove(ctx, g, n, started, pods, res)
}

// syncInterruptions writes the interruptions a provider learned of itself
// on their nodes (the berth.dev/interruption taint and deadline), so that
// they take the same path as a termination handler's notice.
func (c *Controller) syncInterruptions(ctx context.Context, w *world) []error {
	il, ok := c.Cloud.(cloudprovider.InterruptionLister)
	if !ok {
		return nil
	}
	var errs []error
	for _, g := range w.input.NodeGroups {
		notices, err := il.Interruptions(ctx, g)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the interruptions of node group %s: %w", g.Name, err))
			continue
		}
		for _, in := range notices {
			n := w.byName[in.NodeName]
			if n == nil || !owns(g, n) || n.Annotations[v1alpha1.AnnotationInterruptionDeadline] != "" {
				continue
			}
			n = w.own(n)
			// Guarded by the node's resourceVersion: the patch writes the
			// whole taint list, and one read from a cache behind would drop
			// a taint written since (the drain's own, the node lifecycle
			// controller's). A conflict is tried again next round.
			patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
			if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
				return t.Key == v1alpha1.TaintInterruption && t.Effect == corev1.TaintEffectNoSchedule
			}) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Value: "provider", Effect: corev1.TaintEffectNoSchedule})
			}
			n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = in.Deadline.UTC().Format(time.RFC3339)
			if err := c.Client.Patch(ctx, n, patch); err != nil {
				errs = append(errs, fmt.Errorf("writing the interruption of node %s: %w", n.Name, err))
				continue
			}
			log.FromContext(ctx).Info("the provider announced an interruption", "node", n.Name, "deadline", in.Deadline, "message", in.Message)
		}
	}
	return errs
}

// avoidInterrupted marks the offering of an interrupted node unavailable
// when the cloud is taking its capacity back (lifecycle.TakesCapacity: a
// spot interruption): a replacement launched on it would likely be
// interrupted too.
func (c *Controller) avoidInterrupted(g *v1alpha1.NodeGroup, n *corev1.Node) {
	if c.Offerings == nil || !lifecycle.TakesCapacity(n, lifecycle.Interrupted(g, n, c.Clock.Now())) {
		return
	}
	l := n.Labels
	c.Offerings.MarkUnavailable(v1alpha1.OfferingKey{NodeGroup: g.Name, InstanceType: l[v1alpha1.LabelInstanceType], Zone: l[v1alpha1.LabelZone],
		CapacityType: l[v1alpha1.LabelCapacityType]}, state.FailureCapacityReclaimed, "node "+n.Name+" of this offering got an interruption notice")
}
