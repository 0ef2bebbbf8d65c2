package fidelity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// TestPlansOnABaseAreThePlansFromScratch plans the random clusters of
// TestPlansHoldWhenTheNodesArrive as a controller plans round after round,
// on one snapshot.Base: every pod pending, then half of them, then all
// again. Each round's plan must be the plan of the same input planned
// from scratch: whatever a round registered (classes, spread, affinity
// and anti-affinity counters, templates, planned nodes, limits) is gone
// from the next.
func TestPlansOnABaseAreThePlansFromScratch(t *testing.T) {
	for seed := int64(1); seed <= int64(*cases)/3; seed++ {
		c := GeneratePlan(seed)
		base := snapshot.NewBase()
		for round, pending := range [][]*corev1.Pod{c.Pending, c.Pending[:len(c.Pending)/2], c.Pending} {
			in := scaleup.Input{NodeGroups: c.Groups, Nodes: c.Nodes, Pods: c.Bound, Pending: pending, DaemonSets: c.DaemonSets}
			want, err := scaleup.Run(in)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			in.Base = base
			got, err := scaleup.Run(in)
			if err != nil {
				t.Fatalf("seed %d, round %d on the base: %v", seed, round, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d, round %d: the plan on the base differs (-from scratch +on the base):\n%s", seed, round, diff)
			}
		}
		// Built once (rounds with nothing to place do not model the
		// cluster), then only brought up to date: the cluster is the same.
		if base.Builds > 1 {
			t.Fatalf("seed %d: the base was built %d times, brought up to date %d times", seed, base.Builds, base.Syncs)
		}
	}
}
