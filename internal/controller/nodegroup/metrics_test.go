package nodegroup

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/builders"
)

// TestMetricsFollowTheStatus: the alerts read a group's size, its max and
// the offerings it avoids from these series, so they must follow the
// status and go when an offering is tried again or the group is gone.
func TestMetricsFollowTheStatus(t *testing.T) {
	ng := builders.NodeGroup("metrics-g", builders.Size(0, 4))
	status := &v1alpha1.NodeGroupStatus{Nodes: 3, UnavailableOfferings: []v1alpha1.UnavailableOffering{
		{InstanceType: "c-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeSpot, Streak: 2},
	}}
	observe(ng, status, 0.3)
	if got := testutil.ToFloat64(groupNodes.WithLabelValues("metrics-g")); got != 3 {
		t.Errorf("nodes %v", got)
	}
	if got := testutil.ToFloat64(groupMaxSize.WithLabelValues("metrics-g")); got != 4 {
		t.Errorf("max size %v", got)
	}
	if got := testutil.ToFloat64(offeringStreak.WithLabelValues("metrics-g", "c-2", "zone-a", "spot")); got != 2 {
		t.Errorf("streak %v", got)
	}
	status.UnavailableOfferings = nil
	observe(ng, status, 0.3)
	if n := testutil.CollectAndCount(offeringStreak); n != 0 {
		t.Errorf("%d streak series left after the offering was tried again", n)
	}
	forget("metrics-g")
	if n := testutil.CollectAndCount(groupNodes) + testutil.CollectAndCount(fleetPrice); n != 0 {
		t.Errorf("%d series left after the group was deleted", n)
	}
}
