package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// due returns the planned removals whose node has been removable for its
// group's consolidateAfter (in its window; at once for a group being
// deleted), at most MaxRemovalsPerRound, once the countdown follows the
// plan (scaledown.Countdown).
func (c *Controller) due(w *world, plan *scaledown.Plan) []scaledown.Removal {
	now := w.input.Now // the planner's: what it planned as due is due here
	c.removableSince.Follow(plan, now)
	var out []scaledown.Removal
	for _, r := range plan.Remove {
		since := c.removableSince[r.Node]
		g := w.groups[r.NodeGroup]
		if g == nil || len(out) >= c.opts.MaxRemovalsPerRound {
			continue
		}
		// A deleted group's nodes go at once, whatever its window: the user
		// asked for it.
		if !r.WaitsForWindow() || (now.Sub(since) >= g.Spec.Disruption.After() && c.windowOpen(g, now)) {
			out = append(out, r)
		}
	}
	return out
}

// dueAll reports whether every node of a replacement has been removable
// for its group's consolidateAfter, in its group's window.
func (c *Controller) dueAll(w *world, nodes []string) bool {
	now := w.input.Now
	for _, name := range nodes {
		n := w.byName[name]
		if n == nil {
			return false
		}
		g := w.groups[n.Labels[v1alpha1.LabelNodeGroup]]
		since, ok := c.removableSince[name]
		if g == nil || !ok || now.Sub(since) < g.Spec.Disruption.After() || !c.windowOpen(g, now) {
			return false
		}
	}
	return true
}

// report records a ScaleDownBlocked event on each node that stays, once
// per change of reason, and the unremovable-nodes metric.
func (c *Controller) report(w *world, plan *scaledown.Plan) {
	unremovable.Reset()
	seen := map[string]bool{}
	for _, b := range plan.Blocked {
		unremovable.WithLabelValues(string(b.Reason)).Inc()
		seen[b.Node] = true
		if c.lastBlocked[b.Node] == b.Message {
			continue
		}
		c.lastBlocked[b.Node] = b.Message
		if n := w.byName[b.Node]; n != nil {
			c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonScaleDownBlocked, "ScaleDown", "Node is not removed: %s (%s)", b.Message, b.Reason)
		}
	}
	for name := range c.lastBlocked {
		if !seen[name] {
			delete(c.lastBlocked, name)
		}
	}
}

// windowOpen reports whether the group's disruption window (if any) is
// open now. A window that cannot be read (the API server validates the
// cron's shape, not every value) or never opens keeps removals off, and
// says so once per change.
func (c *Controller) windowOpen(g *v1alpha1.NodeGroup, now time.Time) bool {
	open, err := scaledown.WindowOpen(g, now)
	if err != nil {
		msg := fmt.Sprintf("spec.disruption.window: %v; no removal starts in this group", err)
		if c.lastWindow[g.Name] != msg {
			c.lastWindow[g.Name] = msg
			c.Recorder.Eventf(g, nil, corev1.EventTypeWarning, ReasonScaleDownBlocked, "ScaleDown", "%s", msg)
		}
		return false
	}
	return open
}

// replacing reports whether a replacement is under way: a node carries the
// replaced-by mark or the record of one being launched (launching: a
// controller stopped between the launch and the mark), or this replica
// launched one in the last minute (the informer cache may not show the
// marks yet; launching another would double the cost it means to save).
func (c *Controller) replacing(w *world) bool {
	if c.Clock.Since(c.lastReplacement) < time.Minute {
		return true
	}
	for _, n := range w.nodes {
		if n.Annotations[v1alpha1.AnnotationReplacedBy] != "" || c.launching(n) {
			return true
		}
	}
	return false
}

// why says, on the node's event, why it is removed.
func why(r scaledown.RemovalReason) string {
	switch r {
	case scaledown.RemovalNodeGroupDeleted:
		return "its node group is being deleted (deletionPolicy Drain)"
	case scaledown.RemovalEmpty:
		return "no pod on it needs a new home"
	}
	return "its pods fit on the other nodes"
}

// reasonOf is the disruption reason of a removal (none for a deleted
// group's node: its group is going).
func reasonOf(r scaledown.RemovalReason) v1alpha1.DisruptionReason {
	switch r {
	case scaledown.RemovalEmpty:
		return v1alpha1.ReasonEmpty
	case scaledown.RemovalUnderutilized:
		return v1alpha1.ReasonUnderutilized
	}
	return ""
}
