package launchtimeout_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// refusing is a provider whose Delete refuses some nodes, as a Cluster
// API group does while its MachineDeployment rolls out.
type refusing struct {
	cloudprovider.CloudProvider
	nodes []string
}

func (p refusing) Delete(ctx context.Context, name string) error {
	if slices.Contains(p.nodes, name) {
		return errors.New("machinedeployment md-0 is rolling out")
	}
	return p.CloudProvider.Delete(ctx, name)
}

// TestARefusedDeletionTakesNoNewSlot: three groups' never-Ready nodes
// are to be deleted, and their provider refuses each time (a rollout).
// Each is counted once against the three deletions a minute: retried a
// minute later, they take no slot, and a fourth group's never-Ready node
// is deleted then. Before, every retry took a slot, the cap stayed full
// for ever, and the fourth node was never deleted ("capped"). A refusal
// is said on the node, and the LaunchTimeout event is not repeated.
func TestARefusedDeletionTakesNoNewSlot(t *testing.T) {
	var stuck []string
	for _, g := range []string{"refused-a", "refused-b", "refused-c"} {
		stuck = append(stuck, launch(t, createGroup(t, g, time.Hour)).NodeName)
	}
	other := launch(t, createGroup(t, "refused-other", time.Hour)).NodeName
	r, clk, _, events := reconciler()
	r.Cloud = refusing{CloudProvider: r.Cloud, nodes: stuck}
	pass := func(name string) {
		t.Helper()
		_, _ = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	}
	gone := func(name string) bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &corev1.Node{}))
	}
	clk.Step(time.Hour)
	for _, n := range stuck {
		pass(n)
	}
	pass(other)
	if gone(other) {
		t.Fatal("the fourth node was deleted in the minute three deletions were decided in")
	}
	for minute := range 3 {
		clk.Step(2 * time.Minute)
		for _, n := range stuck {
			pass(n)
		}
		pass(other)
		if gone(other) {
			break
		}
		if minute == 2 {
			t.Fatalf("the fourth group's never-Ready node is still there after %d minutes: the refused retries hold the cap", 2*(minute+1))
		}
	}
	count := func(node, reason string) int {
		return len(slices.DeleteFunc(events.For(node), func(e fakes.Event) bool { return e.Reason != reason }))
	}
	if n := count(stuck[0], launchtimeout.ReasonLaunchTimeout); n != 1 {
		t.Errorf("%d %s events on a node whose deletion was retried, want 1", n, launchtimeout.ReasonLaunchTimeout)
	}
	if n := count(stuck[0], launchtimeout.ReasonLaunchTimeoutDeleteFailed); n != 1 {
		t.Errorf("%d %s events on a node whose deletion the provider refused, want 1 (the same message once)", n, launchtimeout.ReasonLaunchTimeoutDeleteFailed)
	}
}
