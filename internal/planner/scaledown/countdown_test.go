package scaledown_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// TestACountdownFollowsThePlan: a node planned removed or replaced
// counts from the first round it was; one held back by its group or a
// finishing pod (Blocked.Waits) keeps its count, and starts one when it
// has nothing else to move; one whose pods have no home any more, or
// that the plan does not name, stops counting.
func TestACountdownFollowsThePlan(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	c := scaledown.Countdown{"removed": t0, "held": t0, "no-home": t0, "gone": t0}
	c.Follow(&scaledown.Plan{
		Remove:  []scaledown.Removal{{Node: "removed"}, {Node: "new"}},
		Replace: []scaledown.Replacement{{Nodes: []string{"replaced"}}},
		Blocked: []scaledown.Blocked{
			{Node: "held", Reason: scaledown.ReasonBudget, Waits: true},
			{Node: "held-empty", Reason: scaledown.ReasonBudget, Waits: true, Empty: true},
			{Node: "held-busy", Reason: scaledown.ReasonBudget, Waits: true},
			{Node: "no-home", Reason: scaledown.ReasonNoHome},
		},
	}, now)
	want := scaledown.Countdown{"removed": t0, "new": now, "replaced": now, "held": t0, "held-empty": now}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("countdown (-want +got):\n%s", diff)
	}
}
