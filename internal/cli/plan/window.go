package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// closedWindows says, for each node group of the plan's removals,
// replacements and disruptions that wait for the group's window
// (WaitsForWindow), whose window is closed at now or cannot be read, that
// the controller starts none of them there now.
func closedWindows(groups []*v1alpha1.NodeGroup, nodes []*corev1.Node, p *scaledown.Plan, now time.Time) []string {
	waiting := map[string]bool{}
	for _, r := range p.Remove {
		waiting[r.NodeGroup] = waiting[r.NodeGroup] || r.WaitsForWindow()
	}
	replaced := map[string]bool{}
	for _, r := range p.Replace {
		for _, n := range r.Nodes {
			replaced[n] = true
		}
	}
	for _, n := range nodes {
		if replaced[n.Name] {
			waiting[n.Labels[v1alpha1.LabelNodeGroup]] = true
		}
	}
	for _, d := range p.Disruptions {
		waiting[d.NodeGroup] = waiting[d.NodeGroup] || d.WaitsForWindow()
	}
	var out []string
	for _, g := range groups {
		if !waiting[g.Name] {
			continue
		}
		switch open, err := scaledown.WindowOpen(g, now); {
		case err != nil:
			out = append(out, fmt.Sprintf("node group %s: spec.disruption.window: %v; the controller starts no removal there", g.Name, err))
		case !open:
			w := g.Spec.Disruption.Window
			out = append(out, fmt.Sprintf("node group %s: its disruption window (%q for %s, UTC) is closed at %s; the controller starts these removals there once it opens",
				g.Name, w.Cron, w.Duration.Duration, now.UTC().Format(time.RFC3339)))
		}
	}
	return out
}
