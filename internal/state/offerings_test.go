package state_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
)

// TestFailedOfferingsComeBackAfterTheirTTL: a failed offering is avoided
// for the TTL and then offered again; node groups see only their own
// failures, oldest first, and when the next one expires.
func TestFailedOfferingsComeBackAfterTheirTTL(t *testing.T) {
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	o := state.NewOfferings(clk, 3*time.Minute)
	var changed []string
	o.OnChange = func(g string) { changed = append(changed, g) }

	spotA := scaleup.Offering{NodeGroup: "general", InstanceType: "c-2", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeSpot)}
	spotB := scaleup.Offering{NodeGroup: "general", InstanceType: "c-2", Zone: "zone-b", CapacityType: string(v1alpha1.CapacityTypeSpot)}
	large := scaleup.Offering{NodeGroup: "large", InstanceType: "l-4", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeOnDemand)}

	o.MarkUnavailable(spotA, state.FailureInsufficientCapacity, "insufficient capacity")
	clk.SetTime(start.Add(time.Minute))
	o.MarkUnavailable(spotB, state.FailureInsufficientCapacity, "insufficient capacity")
	o.MarkUnavailable(large, state.FailureInsufficientCapacity, "insufficient capacity")

	if diff := cmp.Diff([]string{"general", "general", "large"}, changed); diff != "" {
		t.Errorf("change notifications (-want +got):\n%s", diff)
	}
	var general []scaleup.Offering
	for _, f := range o.Failures("general") {
		general = append(general, f.Offering)
	}
	if diff := cmp.Diff([]scaleup.Offering{spotA, spotB}, general); diff != "" {
		t.Errorf("failures of general, oldest first (-want +got):\n%s", diff)
	}
	if got, want := o.NextExpiry("general"), start.Add(3*time.Minute); !got.Equal(want) {
		t.Errorf("next expiry of general %s, want %s", got, want)
	}
	if got := len(o.Unavailable()); got != 3 {
		t.Errorf("%d offerings unavailable, want 3", got)
	}

	clk.SetTime(start.Add(3 * time.Minute)) // spotA's TTL is over
	if diff := cmp.Diff([]scaleup.Offering{spotB, large}, o.Unavailable()); diff != "" {
		t.Errorf("unavailable after the first TTL (-want +got):\n%s", diff)
	}
	clk.SetTime(start.Add(4 * time.Minute))
	if got := o.Unavailable(); len(got) != 0 {
		t.Errorf("still unavailable after every TTL: %v", got)
	}
	if got := o.NextExpiry("general"); !got.IsZero() {
		t.Errorf("next expiry %s with no failure left, want zero", got)
	}
}

// TestAnOfferingThatKeepsFailingWaitsLongerEachTime: each failure soon
// after the previous wait ended doubles the wait, up to MaxBackoffFactor
// times the TTL; after a good spell of one TTL the wait is back to one TTL.
func TestAnOfferingThatKeepsFailingWaitsLongerEachTime(t *testing.T) {
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	ttl := time.Minute
	o := state.NewOfferings(clk, ttl)
	bad := scaleup.Offering{NodeGroup: "general", InstanceType: "c-2", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeOnDemand)}

	var waits []time.Duration
	for range 7 {
		o.MarkUnavailable(bad, state.FailureLaunchError, "webhook denied the node")
		until := o.NextExpiry("general")
		waits = append(waits, until.Sub(clk.Now()))
		clk.SetTime(until) // tried again as soon as allowed, and fails again
	}
	want := []time.Duration{ttl, 2 * ttl, 4 * ttl, 8 * ttl, 16 * ttl, 16 * ttl, 16 * ttl}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits of an offering failing every time (-want +got):\n%s", diff)
	}

	clk.SetTime(clk.Now().Add(ttl)) // one TTL without a failure
	o.MarkUnavailable(bad, state.FailureLaunchError, "webhook denied the node")
	if got := o.NextExpiry("general").Sub(clk.Now()); got != ttl {
		t.Errorf("wait after a good spell %s, want the base TTL %s", got, ttl)
	}
}

// TestFailuresOfOneWaitDoNotLengthenTheBackoff: the failures of one wait
// (the five launches of one round answered out of capacity, the nodes of
// one spot reclaim wave) are one failure: the wait is one TTL from the
// last of them, not doubled for each; the next failure after the wait
// doubles it once.
func TestFailuresOfOneWaitDoNotLengthenTheBackoff(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	ttl := 3 * time.Minute
	o := state.NewOfferings(clk, ttl)
	spot := scaleup.Offering{NodeGroup: "general", InstanceType: "m-2", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeSpot)}

	for range 5 {
		o.MarkUnavailable(spot, state.FailureInsufficientCapacity, "insufficient capacity")
	}
	if got := o.NextExpiry("general").Sub(start); got != ttl {
		t.Errorf("avoided for %s after five failures of one round, want the TTL %s", got, ttl)
	}
	clk.SetTime(start.Add(time.Minute)) // another failure while avoided
	o.MarkUnavailable(spot, state.FailureInsufficientCapacity, "insufficient capacity")
	if got, want := o.NextExpiry("general"), start.Add(time.Minute+ttl); !got.Equal(want) {
		t.Errorf("avoided until %s after a failure within the wait, want one TTL from it: %s", got.Format(time.TimeOnly), want.Format(time.TimeOnly))
	}
	clk.SetTime(o.NextExpiry("general")) // tried again once allowed, and fails again
	o.MarkUnavailable(spot, state.FailureInsufficientCapacity, "insufficient capacity")
	if got := o.NextExpiry("general").Sub(clk.Now()); got != 2*ttl {
		t.Errorf("avoided for %s after failing again once the wait ended, want twice the TTL", got)
	}
	clk.SetTime(clk.Now().Add(time.Minute)) // a failure within a doubled wait does not shorten it
	o.MarkUnavailable(spot, state.FailureInsufficientCapacity, "insufficient capacity")
	if got := o.NextExpiry("general").Sub(clk.Now()); got != 2*ttl {
		t.Errorf("avoided for %s more after a failure within a doubled wait, want twice the TTL from it", got)
	}
}

// TestAnOfferingWhoseEveryLaunchHangsWaitsLongerEachTime: each launch of
// an offering hangs, found out only 15 minutes later (a node never Ready,
// a machine whose Node never registers); the offering is launched again
// as soon as its wait ends. Judged at the launch, each failure continues
// the streak, though it comes to light long after the previous wait
// ended: the waits double as for failures found at once.
func TestAnOfferingWhoseEveryLaunchHangsWaitsLongerEachTime(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	ttl, provision := 3*time.Minute, 15*time.Minute
	o := state.NewOfferings(clk, ttl)
	hangs := scaleup.Offering{NodeGroup: "general", InstanceType: "c-2", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeOnDemand)}
	launched := start
	var waits []time.Duration
	for range 4 {
		clk.SetTime(launched.Add(provision))
		_ = o.Failures("") // rounds read the failures meanwhile
		o.MarkLaunchFailed(hangs, "node did not become Ready", launched)
		until := o.NextExpiry("general")
		waits = append(waits, until.Sub(clk.Now()))
		launched = until // launched again as soon as allowed
	}
	if diff := cmp.Diff([]time.Duration{ttl, 2 * ttl, 4 * ttl, 8 * ttl}, waits); diff != "" {
		t.Errorf("waits of an offering whose every launch hangs (-want +got):\n%s", diff)
	}
}
