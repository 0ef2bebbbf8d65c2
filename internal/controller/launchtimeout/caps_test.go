package launchtimeout_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
)

// reconcileAll reconciles each node once and returns how many were deleted.
func reconcileAll(t *testing.T, r *launchtimeout.Reconciler, names []string) int {
	t.Helper()
	deleted := 0
	for _, name := range names {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &corev1.Node{}); apierrors.IsNotFound(err) {
			deleted++
		}
	}
	return deleted
}

// TestAnAdoptedNodeThatLivedBeforeIsNotALaunch: a node that had run for an
// hour when berth adopted it (a Cluster API Machine's node) and is NotReady
// now is not deleted as a failed launch.
func TestAnAdoptedNodeThatLivedBeforeIsNotALaunch(t *testing.T) {
	inst := launch(t, createGroup(t, "adopted", time.Hour))
	node := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: inst.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, inst.NodeName, v1alpha1.AnnotationAdoptedAt, node.CreationTimestamp.Add(time.Hour).UTC().Format(time.RFC3339))
	r, clk, _, _ := reconciler()
	clk.Step(2 * time.Hour)
	if n := reconcileAll(t, r, []string{inst.NodeName}); n != 0 {
		t.Errorf("the adopted node was deleted as a failed launch")
	}
	// Adopted young (berth's own Cluster API launch), it is a launch.
	young := launch(t, createGroup(t, "adopted-young", time.Hour))
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: young.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, young.NodeName, v1alpha1.AnnotationAdoptedAt, node.CreationTimestamp.Add(time.Minute).UTC().Format(time.RFC3339))
	if n := reconcileAll(t, r, []string{young.NodeName}); n != 1 {
		t.Errorf("a node adopted a minute after it was created and never Ready was not deleted")
	}
}

// foreignMachines says every instance is one berth did not launch (a
// Cluster API Machine a rollout made).
type foreignMachines struct{ cloudprovider.CloudProvider }

func (c foreignMachines) Get(ctx context.Context, name string) (*cloudprovider.Instance, error) {
	inst, err := c.CloudProvider.Get(ctx, name)
	if inst != nil {
		inst.NotLaunched = true
	}
	return inst, err
}

// TestANodeOfAMachineBerthDidNotLaunchIsNotTimedOut: a node adopted as it
// registered (a Cluster API Machine a rollout made, which the provider
// says berth did not launch) never turns Ready: it is not deleted as a
// failed launch of berth's; Cluster API's remediation is its owner's.
func TestANodeOfAMachineBerthDidNotLaunchIsNotTimedOut(t *testing.T) {
	inst := launch(t, createGroup(t, "rollout", time.Hour))
	node := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: inst.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, inst.NodeName, v1alpha1.AnnotationAdoptedAt, node.CreationTimestamp.Add(time.Minute).UTC().Format(time.RFC3339))
	r, clk, _, _ := reconciler()
	r.Cloud = foreignMachines{r.Cloud}
	clk.Step(2 * time.Hour)
	if n := reconcileAll(t, r, []string{inst.NodeName}); n != 0 {
		t.Errorf("the node of a Machine berth did not launch was deleted as a failed launch")
	}
}

// TestLaunchTimeoutsAreCapped: ten nodes of one group never became Ready;
// one decision deletes at most a share of the group (20 %: two), and
// across groups at most three a minute; a minute later it goes on.
func TestLaunchTimeoutsAreCapped(t *testing.T) {
	ng := createGroup(t, "capped", time.Hour)
	var names []string
	for range 10 {
		names = append(names, launch(t, ng).NodeName)
	}
	r, clk, _, events := reconciler()
	clk.Step(time.Hour)
	if n := reconcileAll(t, r, names); n != 2 {
		t.Fatalf("deleted %d of 10 never-Ready nodes in one minute, want 2 (20 %% of the group)", n)
	}
	capped := 0
	for _, name := range names {
		for _, e := range events.For(name) {
			if e.Reason == launchtimeout.ReasonLaunchTimeoutCapped {
				capped++
			}
		}
	}
	if capped != 8 {
		t.Errorf("%d capped events, want one on each of the 8 nodes kept", capped)
	}
	// Another group of ten in the same minute: its share would allow two,
	// the cap across groups (three a minute) allows one.
	other := createGroup(t, "capped-other", time.Hour)
	var others []string
	for range 10 {
		others = append(others, launch(t, other).NodeName)
	}
	if n := reconcileAll(t, r, others); n != 1 {
		t.Fatalf("deleted %d of another group's 10 in the same minute, want 1 (three a minute in all)", n)
	}
	clk.Step(2 * time.Minute)
	if n := reconcileAll(t, r, others); n != 1+1 {
		t.Errorf("a minute later %d of the other group's nodes are gone, want 1 + 1 (20 %% of the 9 left)", n)
	}
}

// TestNoLaunchTimeoutDuringAPartition: most of a group's nodes that were
// Ready, and more than 3 (PartitionMinNodes, as Cluster Autoscaler
// counts), went NotReady together; a never-Ready node of the group is not
// taken for a failed launch.
func TestNoLaunchTimeoutDuringAPartition(t *testing.T) {
	ng := createGroup(t, "partition", time.Hour)
	var was []string
	for range 4 {
		name := launch(t, ng).NodeName
		patchLabel(t, name, v1alpha1.LabelInitialized, "true") // Ready once, NotReady now
		was = append(was, name)
	}
	fresh := launch(t, ng).NodeName
	r, clk, _, events := reconciler()
	clk.Step(time.Hour)
	if n := reconcileAll(t, r, []string{fresh}); n != 0 {
		t.Fatal("a never-Ready node was deleted while the group's Ready nodes are all NotReady")
	}
	if ev := events.For(fresh); len(ev) != 1 || ev[0].Reason != launchtimeout.ReasonLaunchTimeoutCapped {
		t.Errorf("events %+v, want one LaunchTimeoutCapped", ev)
	}
	if len(was) != 4 {
		t.Fatal("setup")
	}
}

// TestSuspendedStandbyNodesAreNoPartition: a group whose nodes that were
// Ready are suspended standby nodes (NotReady by design) is not
// partitioned: its never-Ready node is deleted at its timeout.
func TestSuspendedStandbyNodesAreNoPartition(t *testing.T) {
	ng := createGroup(t, "standby-no-partition", time.Hour)
	for range 3 {
		inst, err := kwok.New(env.Client, clock.RealClock{}).Create(context.Background(), cloudprovider.CreateRequest{NodeGroup: ng, StandbyFor: "web",
			Offering: cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
		if err != nil {
			t.Fatal(err)
		}
		patchLabel(t, inst.NodeName, v1alpha1.LabelInitialized, "true")
		patchAnnotation(t, inst.NodeName, v1alpha1.AnnotationSuspendedAt, time.Now().UTC().Format(time.RFC3339))
	}
	fresh := launch(t, ng).NodeName
	r, clk, _, _ := reconciler()
	clk.Step(time.Hour)
	if n := reconcileAll(t, r, []string{fresh}); n != 1 {
		t.Fatal("a never-Ready node was kept as if its group were partitioned; its other nodes are suspended standby nodes")
	}
}
