package explain

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/simulator/predicates"
)

// TestEveryRuleThatKeepsANodeHasAHint: a new drain rule or scale-down
// reason without a hint would leave `berth explain node` mute about what
// to change.
func TestEveryRuleThatKeepsANodeHasAHint(t *testing.T) {
	reasons := []drain.Reason{
		scaledown.ReasonNodeDoNotDisrupt, scaledown.ReasonPolicy, scaledown.ReasonMinSize, scaledown.ReasonBudget,
		scaledown.ReasonNoHome, scaledown.ReasonHeadroom, scaledown.ReasonNotOwned, scaledown.ReasonNominated,
		scaledown.ReasonWorkloadClaim, scaledown.ReasonRecentlyGivenUp, scaledown.ReasonGroupHeld, scaledown.ReasonUnplaceable, scaledown.ReasonReplacementHeld, scaledown.ReasonRepairHeld,
	}
	for _, r := range drain.Rules() {
		if r.Name() != drain.ReasonGoesWithNode && r.Name() != drain.ReasonTerminating { // they never block
			reasons = append(reasons, r.Name())
		}
	}
	for _, r := range reasons {
		if nodeHint(string(r)) == "" {
			t.Errorf("reason %s has no hint in nodeHints", r)
		}
	}
}

func TestGroupHintsNameWhatToChange(t *testing.T) {
	tests := []struct{ name, reason, want string }{
		{"a group at maxSize is told to raise it", "node group at maxSize 3", "spec.maxSize"},
		{"a group limit is told to raise it", "node group limit on cpu reached (8 of 8)", "spec.limits"},
		{"the cluster's node cap names its flag", "cluster at its cap of 40 nodes (40 nodes; --max-nodes-total)", "raise it"},
		{"a round's node cap says the next round plans the pod", "round at its cap of 1000 nodes launched (--max-nodes-per-round; the next round plans the rest)", "the next round"},
		{"the cluster limit names the controller's flags", "cluster limit on memory reached (4000Gi of 4000Gi)", "--cluster-max-memory"},
		{"a missing offering names the pod's selector and the group's offerings", "no instance type or capacity type matches the pod's node selector/affinity", "spec.instanceTypes"},
		{"a missing label names the group's template labels", predicates.ReasonNodeAffinity, "spec.template.labels"},
		{"a taint asks for a toleration", "untolerated taint gpu=true:NoSchedule", "toleration"},
		{"too little cpu asks for smaller requests or a larger type", "insufficient cpu (needs 64, max 2)", "lower the pod's requests"},
		{"the scheduler's resource text is understood too", "Insufficient memory", "lower the pod's requests"},
		{"topology spread names the zones", predicates.ReasonSpread, "zones"},
		{"devices name the instance types' devices", predicates.ReasonCannotAllocate, "devices"},
		{"a reason nobody knows gives no hint rather than a wrong one", "the moon is full", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := groupHint(tc.reason)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("groupHint(%q) = %q, want it to contain %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestPodHintsNameTheGroupsTheyApplyTo(t *testing.T) {
	got := podHints([]GroupVerdict{
		{NodeGroup: "a", Reason: "node group at maxSize 3"},
		{NodeGroup: "b", Reason: "the moon is full"},
		{NodeGroup: "c", Reason: "node group at maxSize 5"},
	})
	want := "a, c: raise the node group's spec.maxSize"
	if len(got) != 1 || got[0] != want {
		t.Errorf("hints %q, want [%q]", got, want)
	}
}
