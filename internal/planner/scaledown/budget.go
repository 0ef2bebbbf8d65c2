package scaledown

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
)

// allowed is how many of the group's nodes may be disrupted at once for
// reason now: the group's budget (10 % by default), lowered by every entry
// of spec.disruption.budgets that applies to the reason and whose schedule
// (if any) is active. Interruptions ignore schedules: the cloud does not
// wait. A schedule that cannot be read applies (the safe reading). A
// group being deleted goes one node at a time at least: a budget of 0
// does not keep its deletion waiting for ever. A percentage is of the
// group's nodes that are up (budgetBase), as Karpenter counts them: a
// booting replacement would round it up and let one more go.
func (p *planner) allowed(g *v1alpha1.NodeGroup, reason v1alpha1.DisruptionReason) int {
	n := p.budgetBase[g.Name]
	out := g.Spec.Disruption.Allowed(n)
	for _, b := range g.Spec.Disruption.Budgets {
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		if b.Schedule != "" {
			if reason == v1alpha1.ReasonInterrupted || p.now.IsZero() {
				continue
			}
			var d time.Duration
			if b.Duration != nil {
				d = b.Duration.Duration
			}
			if active, err := headroom.ScheduleActive(b.Schedule, d, p.now); err == nil && !active {
				continue
			}
		}
		out = min(out, scaled(b.Nodes, n))
	}
	if retiring(g) {
		out = max(out, 1)
	}
	return out
}

// scaled is a count or a percentage of n, rounded up; 0 stays 0.
func scaled(v intstr.IntOrString, n int) int { return v1alpha1.ScaledBudget(v, n) }

// inFlight is how many of the group's nodes use its budget for reason:
// those being deleted or drained, those this plan disrupts, and
// countsDown's NotReady ones, as Karpenter counts them.
func (p *planner) inFlight(g *v1alpha1.NodeGroup, reason v1alpha1.DisruptionReason) int {
	n := p.disrupting[g.Name] + p.removed[g.Name]
	if countsDown(g, reason) {
		n += p.notReady[g.Name]
	}
	return n
}

// countsDown reports whether the group's nodes that were Ready once and
// are not now use its budget for reason: their pods may be gone already.
// Not for repair (its own trigger must not starve its budget), nor in a
// group being deleted (they are its candidates too: counted, they would
// hold the removal of the others, and then their own).
func countsDown(g *v1alpha1.NodeGroup, reason v1alpha1.DisruptionReason) bool {
	return reason != v1alpha1.ReasonUnhealthy && !retiring(g)
}

// downNote says, for a budget message, how many of the group's nodes use
// the budget by being NotReady: their owner may look for them.
func (p *planner) downNote(g *v1alpha1.NodeGroup, reason v1alpha1.DisruptionReason) string {
	if n := p.notReady[g.Name]; n > 0 && countsDown(g, reason) {
		return fmt.Sprintf(" (%d of them NotReady)", n)
	}
	return ""
}
