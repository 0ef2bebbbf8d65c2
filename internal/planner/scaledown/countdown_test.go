package scaledown_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// TestACountdownFollowsThePlan: a node planned removed, replaced or held
// back while removable (Blocked.Waits: its budget, a finishing pod)
// counts from the first round it was; one whose pods have no home any
// more, or that the plan does not name, stops counting.
func TestACountdownFollowsThePlan(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	c := scaledown.Countdown{"removed": t0, "held": t0, "no-home": t0, "no-home-held": t0, "gone": t0}
	c.Follow(&scaledown.Plan{
		Remove:  []scaledown.Removal{{Node: "removed"}, {Node: "new"}},
		Replace: []scaledown.Replacement{{Nodes: []string{"replaced"}}},
		Blocked: []scaledown.Blocked{
			{Node: "held", Reason: scaledown.ReasonBudget, Waits: true},
			{Node: "held-new", Reason: scaledown.ReasonBudget, Waits: true},
			{Node: "no-home", Reason: scaledown.ReasonNoHome},
			{Node: "no-home-held", Reason: scaledown.ReasonBudget},
		},
	}, now)
	want := scaledown.Countdown{"removed": t0, "new": now, "replaced": now, "held": t0, "held-new": now}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("countdown (-want +got):\n%s", diff)
	}
}
