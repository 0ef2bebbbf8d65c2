package provisioning

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// hung lists one machine of a group, with infrastructure, that never
// registered its Node.
type hung struct {
	cloudprovider.CloudProvider
	since time.Time
}

func (c hung) Pending(_ context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	return []*cloudprovider.Instance{{NodeName: "machine-0", NodeGroup: ng.Name, CreatedAt: c.since, ProviderID: "test:///m-0",
		Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}}, nil
}

// TestANominationToAMachineThatNeverRegisteredIsForgotten: berth
// nominated a pod to a launching machine; 20 minutes later the machine
// has still not registered its Node. Before a62c2ba the instance was not
// known and the nomination was forgotten; now the cordoned synthetic node
// keeps it known, the nomination is kept, and when kube-scheduler clears
// the pod's nominatedNodeName berth queues the pod to be nominated to the
// dead machine again.
func TestANominationToAMachineThatNeverRegisteredIsForgotten(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	ng := b.NodeGroup("g", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	p := New(Deps{Cloud: hung{since: now.Add(-20 * time.Minute)}, Offerings: state.NewOfferings(clk, 3*time.Minute), Recorder: &fakes.Recorder{}, Clock: clk},
		Options{MaxProvisionTime: 15 * time.Minute})
	pod := b.Pod("web", b.CPU("1"))
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	p.nominated.set(key, "machine-0", "g")

	nodes, _ := p.pendingNodes(context.Background(), []*v1alpha1.NodeGroup{ng}, nil, nil)
	known := p.trackSchedulable(nodes, now)
	p.forgetNominations(known, map[types.NamespacedName]bool{key: true}, nil)
	if got := p.nominated.get(key); got != "" {
		t.Errorf("nomination to the machine that never registered kept (%q)", got)
	}
	old := pod.DeepCopy()
	old.Status.NominatedNodeName = "machine-0"
	p.onPodUpdate(old, pod)
	select {
	case q := <-p.renominateQ:
		t.Errorf("pod %s queued to be nominated again to machine-0, a machine that never registered", q.Name)
	default:
	}
}

// TestAMachineTwoGroupsListIsPlannedOnce: two node groups whose provider
// lists the same booting machine (two groups naming one Cluster API
// object) give one launching node, not the same node twice (which failed
// every round for every group).
func TestAMachineTwoGroupsListIsPlannedOnce(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := b.NodeGroup("a", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	z := b.NodeGroup("z", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	inst := func(group string) *cloudprovider.Instance {
		return &cloudprovider.Instance{NodeName: "machine-0", NodeGroup: group, CreatedAt: now.Add(-time.Minute),
			Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}
	}
	got := BootingOf([]*v1alpha1.NodeGroup{a, z}, map[string][]*cloudprovider.Instance{"a": {inst("a")}, "z": {inst("z")}}, nil, nil, now, 15*time.Minute)
	if len(got.Nodes) != 1 || got.Nodes[0].Labels[v1alpha1.LabelNodeGroup] != "a" {
		names := []string{}
		for _, n := range got.Nodes {
			names = append(names, n.Name+"/"+n.Labels[v1alpha1.LabelNodeGroup])
		}
		t.Errorf("launching nodes %v, want machine-0 once, of group a", names)
	}
}

// TestTransientFailuresCountOnlyInARow: an offering's transient launch
// failures count the rounds in a row that failed it (launches of one
// round once); a round between that did not fail it starts the count
// again, so that failures hours apart never add up to the offering's
// blame.
func TestTransientFailuresCountOnlyInARow(t *testing.T) {
	p := New(Deps{Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now())}, Options{})
	off := scaleup.Offering{NodeGroup: "g", InstanceType: "m-2", Zone: "zone-a", CapacityType: "on-demand"}
	count := func(round uint64) int {
		p.roundID = round
		return p.transientFailure(off)
	}
	for _, step := range []struct {
		round uint64
		want  int
	}{{1, 1}, {1, 1}, {2, 2}, {5, 1}, {6, 2}, {7, 3}} {
		if got := count(step.round); got != step.want {
			t.Fatalf("round %d: %d rounds in a row, want %d", step.round, got, step.want)
		}
	}
}
