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
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
)

// Event reasons: ReasonReplacing on nodes being replaced;
// ReasonReplacementLaunchFailed on the node group whose replacement (for
// a cheaper node or a node's lifecycle) could not be launched.
const (
	ReasonReplacing               = "Replacing"
	ReasonReplacementLaunchFailed = "ReplacementLaunchFailed"
)

// replacementGrace is how long a replacement may be missing from the
// cache after its launch before berth gives the replacement up (a launch
// timeout deletes a replacement that never becomes Ready).
const replacementGrace = 2 * time.Minute

// launchReplacement launches the cheaper node first and marks the nodes it
// replaces; they are drained once it is Ready (awaitReplacement).
func (c *Controller) launchReplacement(ctx context.Context, w *world, r scaledown.Replacement, res *Result) error {
	ng := w.groups[r.New.NodeGroup]
	if ng == nil || slices.ContainsFunc(r.Nodes, func(name string) bool { _, ok := c.marks[name]; return ok }) {
		return nil
	}
	off := cloudprovider.OfferingOf(r.New.Offering())
	if err := c.intend(ctx, w, r.Nodes); err != nil {
		return err
	}
	inst, err := c.Cloud.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: off, Replaces: r.Nodes})
	if err != nil {
		c.forgetIntent(ctx, w, r.Nodes)
		c.launchFailed(ctx, ng, r.New, off, r.Nodes, err)
		return nil
	}
	c.lastReplacement = c.Clock.Now()
	c.Activity.ScaledUp(ng.Name, state.ScaleEvent{Time: c.Clock.Now(), Node: inst.NodeName, Reason: "Replacement",
		Message: fmt.Sprintf("%s, replacing %s at %.4f/h instead of %.4f/h", off, strings.Join(r.Nodes, ", "), r.NewPrice, r.OldPrice)})
	now := c.Clock.Now().UTC().Format(time.RFC3339)
	for _, name := range r.Nodes {
		c.marks[name] = mark{at: c.Clock.Now(), annotations: map[string]string{v1alpha1.AnnotationReplacedBy: inst.NodeName,
			v1alpha1.AnnotationReplacementStarted: now}}
	}
	for _, name := range r.Nodes {
		n := w.own(w.byName[name])
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		c.marks[name].apply(n)
		if err := c.Client.Patch(ctx, n, patch); err != nil {
			return fmt.Errorf("marking node %s replaced: %w", name, err)
		}
		delete(c.removableSince, name)
		c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonReplacing, "ScaleDown",
			"Replacing nodes %s (%.4f/h) by new node %s (%s, %.4f/h); they are drained once it is Ready",
			strings.Join(r.Nodes, ", "), r.OldPrice, inst.NodeName, off, r.NewPrice)
	}
	res.Replacements = append(res.Replacements, inst.NodeName)
	log.FromContext(ctx).Info("launched a cheaper replacement", "node", inst.NodeName, "offering", off.String(), "replaces", r.Nodes,
		"oldPricePerHour", r.OldPrice, "newPricePerHour", r.NewPrice)
	return nil
}

// awaitReplacement starts the drain of a replaced node once its
// replacements (berth.dev/replaced-by, comma-separated) are all Ready and
// up (upFor) and the node's pods still have a home; it gives the
// replacement up if a new node is gone, or not Ready past the max
// provision time after the launch.
func (c *Controller) awaitReplacement(ctx context.Context, w *world, n *corev1.Node, res *Result) error {
	names := nodeutil.ReplacedBy(n)
	started, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationReplacementStarted])
	if err != nil {
		started = time.Time{}
	}
	g := w.groups[n.Labels[v1alpha1.LabelNodeGroup]]
	if !owns(g, n) {
		res.GivenUp = append(res.GivenUp, n.Name)
		return c.unmark(ctx, w, n, "Replacement given up: the node's node group no longer exists or is not the one that launched it; the node stays")
	}
	if v := lifecycle.Interrupted(g, n, c.Clock.Now()); v != nil {
		// The cloud takes the node at its deadline, replaced or not: its
		// drain starts now, within the notice (advance evicts by the
		// deadline); the replacement takes pods once it is Ready.
		c.avoidInterrupted(g, n)
		if err := c.start(ctx, w, n, v1alpha1.ReasonInterrupted, "it is interrupted ("+v.Message+") while its replacement "+strings.Join(names, ", ")+" launches"); err != nil {
			return err
		}
		res.started(n.Name, v1alpha1.ReasonInterrupted)
		return nil
	}
	for _, name := range names {
		repl := w.byName[name]
		switch {
		case repl == nil && c.Clock.Since(started) > replacementGrace && !c.stillLaunching(ctx, w, name, started):
			res.GivenUp = append(res.GivenUp, n.Name)
			return c.unmark(ctx, w, n, "Replacement "+name+" is gone; the node stays")
		case repl != nil && !nodeutil.Schedulable(repl) && !started.IsZero() && c.Clock.Since(started) > c.maxProvisionTime():
			// It came up and went down (a launch timeout deletes a node
			// never Ready), or never came up: the nodes are not held
			// for it (they would be candidates for nothing, use the
			// budget and hold every other replacement back for ever).
			res.GivenUp = append(res.GivenUp, n.Name)
			return c.unmark(ctx, w, n, "Replacement "+name+" is not Ready "+c.maxProvisionTime().String()+" after its launch; the node stays")
		case repl == nil || !nodeutil.Schedulable(repl) || !c.upFor(w, repl):
			return nil // still launching
		}
	}
	blocked, err := scaledown.Recheck(w.input, n.Name)
	if err != nil {
		return err
	}
	if blocked != nil && blocked.Reason == scaledown.ReasonNominated && !started.IsZero() && c.Clock.Since(started) <= c.maxProvisionTime() {
		// A pod is on its way to the node (kube-scheduler preempted for
		// it, or a per-node reserve was handed to it): wait for it to
		// bind, then check again (its room may still be found on the
		// nodes that stay); a nomination that outlasts the max provision
		// time since the launch gives the replacement up.
		return nil
	}
	if blocked != nil {
		res.GivenUp = append(res.GivenUp, n.Name)
		return c.unmark(ctx, w, n, "Replacement "+strings.Join(names, ", ")+" is Ready but the node cannot be removed any more: "+blocked.Message)
	}
	if c.paceFull(res) {
		return nil // its drain starts in a later round
	}
	why := "its replacement " + strings.Join(names, ", ") + " is Ready and its pods fit there"
	if r := n.Annotations[v1alpha1.AnnotationDisruptionReason]; r != "" {
		why = "it is " + r + "; " + why
	}
	reason := v1alpha1.DisruptionReason(n.Annotations[v1alpha1.AnnotationDisruptionReason])
	if err := c.start(ctx, w, n, reason, why); err != nil {
		return err
	}
	res.started(n.Name, reason)
	return nil
}

// upFor reports whether a Ready replacement is up for the pods it takes:
// none of its group's startup taints, the cloud controller manager's
// uninitialized taint or a startup taint by convention
// (nodeutil.StartupByConvention) is left, and the extended resources (GPUs) its
// instance type has show in its allocatable. Until then the pods evicted
// to it would wait. Past the max provision time after its launch it is
// what it is: the re-check of the removal decides.
func (c *Controller) upFor(w *world, repl *corev1.Node) bool {
	g := w.groups[repl.Labels[v1alpha1.LabelNodeGroup]]
	if g == nil || c.Clock.Since(nodeutil.BootedSince(repl)) > c.maxProvisionTime() {
		return true
	}
	startup := nodeutil.StartupTaints(g)
	for _, t := range repl.Spec.Taints {
		if nodeutil.StartupByConvention(t) || slices.ContainsFunc(startup, func(s corev1.Taint) bool { return s.Key == t.Key }) {
			return false
		}
	}
	it, _ := g.FindOffering(repl.Labels[v1alpha1.LabelInstanceType], repl.Labels[v1alpha1.LabelZone], v1alpha1.CapacityType(repl.Labels[v1alpha1.LabelCapacityType]))
	if it == nil {
		return true
	}
	for name := range it.ExtendedResources() {
		if got, ok := repl.Status.Allocatable[name]; !ok || got.IsZero() {
			return false
		}
	}
	return true
}

// stillLaunching reports whether the provider still launches the named
// replacement, launched at started: a Cluster API Machine registers its
// Node minutes after it was created, long after replacementGrace, and a
// replacement given up meanwhile would be planned and launched again. The
// providers' pending instances are asked once a round, and only when a
// replacement is missing past its grace; while the provider cannot answer
// for some group, every replacement counts as still launching (the nodes
// stay marked, nothing is destroyed). None is awaited past the max
// provision time, whatever the provider says.
func (c *Controller) stillLaunching(ctx context.Context, w *world, name string, started time.Time) bool {
	if c.Clock.Since(started) > c.maxProvisionTime() {
		return false
	}
	if w.launching == nil {
		w.launching = map[string]bool{}
		pending, failed := cloudprovider.Pending(ctx, c.Cloud, w.input.NodeGroups)
		for group, err := range failed {
			log.FromContext(ctx).Info("could not list the node group's launching instances; waiting for replacements", "nodeGroup", group, "error", err.Error())
		}
		w.launchingUnsure = len(failed) > 0
		for _, insts := range pending {
			for _, inst := range insts {
				if !inst.GivenUp {
					w.launching[inst.NodeName] = true
				}
			}
		}
	}
	return w.launchingUnsure || w.launching[name]
}

// unmark removes the replacement annotations: the node stays.
func (c *Controller) unmark(ctx context.Context, w *world, n *corev1.Node, msg string) error {
	n = w.own(n)
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(n.Annotations, v1alpha1.AnnotationReplacedBy)
	delete(n.Annotations, v1alpha1.AnnotationReplacementStarted)
	delete(n.Annotations, v1alpha1.AnnotationDisruptionReason)
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("unmarking node %s: %w", n.Name, err)
	}
	delete(c.marks, n.Name)
	c.Recorder.Eventf(n, nil, corev1.EventTypeWarning, ReasonDrainStopped, "ScaleDown", "%s", msg)
	return nil
}

// launchFailed handles a replacement whose launch failed: the next round
// plans again. Unless the call itself failed (a transient error, or the
// controller stopping) or the provider refused at the group's maxSize,
// the offering is at fault: it is avoided, as the provisioner avoids an
// offering it could not launch (for longer each time it fails again), so
// that the next round's replacement is planned on another offering
// instead of failing on the same one round after round; and the node
// group gets a Warning event. A refusal at maxSize (a Cluster API group
// at its replica limit cannot add a replacement first) blames no
// offering but is said on the node group too: its nodes wait for room.
func (c *Controller) launchFailed(ctx context.Context, ng *v1alpha1.NodeGroup, nn scaleup.NewNode, off cloudprovider.Offering, replaces []string, err error) {
	log.FromContext(ctx).Info("could not launch a replacement; planning again next round", "nodeGroup", ng.Name, "offering", off.String(),
		"replacing", replaces, "error", err.Error())
	if ctx.Err() != nil || cloudprovider.IsTransient(err) {
		return
	}
	if cloudprovider.IsMaxSize(err) {
		c.Recorder.Eventf(ng, nil, corev1.EventTypeWarning, ReasonReplacementLaunchFailed, "Replace",
			"The provider refused to launch %s to replace %s: %v; the nodes wait until the group has room for a replacement", off, strings.Join(replaces, ", "), err)
		return
	}
	if c.Offerings != nil {
		c.Offerings.MarkUnavailable(nn.Offering(), state.LaunchReason(cloudprovider.IsInsufficientCapacity(err)), err.Error())
	}
	c.Recorder.Eventf(ng, nil, corev1.EventTypeWarning, ReasonReplacementLaunchFailed, "Replace",
		"Could not launch %s to replace %s: %v; the offering is avoided for a while", off, strings.Join(replaces, ", "), err)
}

// maxProvisionTime is Options.MaxProvisionTime, or its default.
func (c *Controller) maxProvisionTime() time.Duration {
	if c.opts.MaxProvisionTime <= 0 {
		return DefaultMaxProvisionTime
	}
	return c.opts.MaxProvisionTime
}
