package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// closedWindows says, for each node group of the plan's removals,
// replacements and drift or expiry replacements whose disruption window
// is closed at now (or cannot be read), why the controller starts none of
// them there now: the planner plans them whatever the window, the
// controller holds them back (a deleted group's removals excepted).
func closedWindows(groups []*v1alpha1.NodeGroup, nodes []*corev1.Node, p *scaledown.Plan, now time.Time) []string {
	groupOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		groupOf[n.Name] = n.Labels[v1alpha1.LabelNodeGroup]
	}
	involved := map[string]bool{}
	for _, r := range p.Remove {
		if r.Reason != scaledown.RemovalNodeGroupDeleted {
			involved[r.NodeGroup] = true
		}
	}
	for _, r := range p.Replace {
		for _, n := range r.Nodes {
			involved[groupOf[n]] = true
		}
	}
	for _, d := range p.Disruptions {
		if d.Reason == v1alpha1.ReasonDrifted || d.Reason == v1alpha1.ReasonExpired {
			involved[d.NodeGroup] = true
		}
	}
	var out []string
	for _, g := range groups {
		w := g.Spec.Disruption.Window
		if w == nil || !involved[g.Name] {
			continue
		}
		open, err := headroom.ScheduleActive(w.Cron, w.Duration.Duration, now)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("node group %s: spec.disruption.window: %v; the controller starts no removal there", g.Name, err))
		case !open:
			out = append(out, fmt.Sprintf("node group %s: its disruption window (%q for %s, UTC) is closed at %s; the controller starts these removals there once it opens",
				g.Name, w.Cron, w.Duration.Duration, now.UTC().Format(time.RFC3339)))
		}
	}
	return out
}
