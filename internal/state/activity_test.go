package state_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/state"
)

func TestActivity(t *testing.T) {
	var told []string
	a := state.NewActivity(func(g string) { told = append(told, g) })
	if up, down := a.Last("g"); up != nil || down != nil {
		t.Fatalf("a new store has events: %v %v", up, down)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.ScaledUp("g", state.ScaleEvent{Time: t0, Node: "n1", Reason: "PendingPods"})
	a.ScaledUp("g", state.ScaleEvent{Time: t0.Add(time.Minute), Node: "n2", Reason: "MinSize"})
	a.ScaledDown("g", state.ScaleEvent{Time: t0.Add(2 * time.Minute), Node: "n1", Reason: "Empty"})
	up, down := a.Last("g")
	if up == nil || up.Node != "n2" || down == nil || down.Node != "n1" {
		t.Errorf("last up %+v, down %+v; want n2 launched and n1 removed", up, down)
	}
	if len(told) != 3 {
		t.Errorf("told %v, want each event", told)
	}
	var none *state.Activity
	none.ScaledUp("g", state.ScaleEvent{}) // a controller without a store records nothing
	if up, _ := none.Last("g"); up != nil {
		t.Error("a nil store has events")
	}
}
