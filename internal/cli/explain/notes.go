package explain

import (
	"fmt"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// nodeNotes say what the running controller weighs besides the plan, for a
// node the plan takes out: its memory (how long the node has been
// removable) and the group's window.
func nodeNotes(e Explanation, f nodeFacts) []string {
	g, now := f.group, f.now
	var out []string
	if e.Reason == string(scaledown.ReasonGroupHeld) {
		out = append(out, "the hold is read from the node group's condition ScaleDownSuspended, as of its last status write; the controller holds from its memory")
	}
	taken := e.Decision == DecisionRemove || e.Decision == DecisionReplace || e.Decision == DecisionDisrupt
	if !taken {
		return out
	}
	windowed := e.Decision == DecisionReplace ||
		(e.Decision == DecisionRemove && e.Reason != string(scaledown.RemovalNodeGroupDeleted)) ||
		e.Reason == string(v1alpha1.ReasonDrifted) || e.Reason == string(v1alpha1.ReasonExpired)
	if e.Decision != DecisionDisrupt && windowed {
		out = append(out, fmt.Sprintf("the controller starts the removal once the node has been removable for the group's consolidateAfter (%s) in a row, "+
			"as it counts in its memory, and starts at most %d drains per round", g.Spec.Disruption.After(), disruption.DefaultMaxRemovalsPerRound))
	}
	if e.Decision == DecisionReplace && f.replacing != "" {
		out = append(out, "berth runs one replacement at a time and node "+f.replacing+" is being replaced now: this one waits")
	}
	if w := g.Spec.Disruption.Window; w != nil && windowed {
		switch open, err := scaledown.WindowOpen(g, now); {
		case err != nil:
			out = append(out, fmt.Sprintf("the group's spec.disruption.window cannot be read (%v): no removal starts", err))
		case open:
			out = append(out, "the group's disruption window ("+w.Cron+", for "+w.Duration.Duration.String()+") is open now")
		default:
			out = append(out, "the group's disruption window ("+w.Cron+", for "+w.Duration.Duration.String()+") is closed now: the removal starts when it opens")
		}
	}
	return out
}
