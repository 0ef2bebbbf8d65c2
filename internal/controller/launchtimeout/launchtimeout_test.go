package launchtimeout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestDeletesNodesThatNeverBecomeReady: a launched node stays NotReady (a
// launch delay of an hour); before the max provision time it is left
// alone, after it the node is deleted, the offering is avoided and the
// node gets an event.
func TestDeletesNodesThatNeverBecomeReady(t *testing.T) {
	ctx := context.Background()
	inst := launch(t, createGroup(t, "slow", time.Hour))
	r, clk, offerings, events := reconciler()
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: inst.NodeName}}

	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 14*time.Minute || res.RequeueAfter > 15*time.Minute {
		t.Errorf("young node: requeue after %s, want about 15m", res.RequeueAfter)
	}
	clk.Step(16 * time.Minute)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, &corev1.Node{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("node after the max provision time: %v, want deleted", err)
	}
	if u := offerings.Unavailable(); len(u) != 1 || u[0].InstanceType != "standard-2" {
		t.Errorf("unavailable %+v, want the timed-out offering", u)
	}
	if ev := events.For(inst.NodeName); len(ev) != 1 || ev[0].Reason != launchtimeout.ReasonLaunchTimeout {
		t.Errorf("events on the node: %+v", ev)
	}
}

// TestNeverDeletesANodeThatWasReady: a node berth saw Ready once is
// labelled initialized; the label is on the node, so a restarted
// controller (a new Reconciler) that finds it NotReady long after the max
// provision time leaves it alone: a kubelet restart or a network partition
// is not a failed launch.
func TestNeverDeletesANodeThatWasReady(t *testing.T) {
	ctx := context.Background()
	ng := createGroup(t, "was-ready", 0)
	inst := launch(t, ng)
	node := &corev1.Node{}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, node)
		return err == nil && nodeutil.Ready(node), "KWOK has not turned the node Ready", err
	})
	r, _, _, _ := reconciler()
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: inst.NodeName}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, req.NamespacedName, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1alpha1.LabelInitialized] != "true" {
		t.Fatalf("labels of a Ready node after a reconcile: %v, want %s=true", node.Labels, v1alpha1.LabelInitialized)
	}

	// A node that never boots, but that a previous controller saw Ready (the
	// label is all that survives a restart): the new controller must not
	// delete it.
	stuck := launch(t, createGroup(t, "was-ready-slow", time.Hour))
	patchLabel(t, stuck.NodeName, v1alpha1.LabelInitialized, "true")
	r, clk, _, events := reconciler()
	clk.Step(24 * time.Hour)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: stuck.NodeName}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: stuck.NodeName}, &corev1.Node{}); err != nil {
		t.Errorf("a node that was Ready once and is NotReady now: %v, want it kept", err)
	}
	if ev := events.For(stuck.NodeName); len(ev) != 0 {
		t.Errorf("events on a kept node: %+v", ev)
	}
}

// TestLeavesNodesBerthDidNotLaunch: NotReady nodes past the max provision
// time that carry berth's node-group label but not the group's owner mark
// (labelled by hand, or launched for an earlier group of the same name)
// are not deleted.
func TestLeavesNodesBerthDidNotLaunch(t *testing.T) {
	ctx := context.Background()
	ng := createGroup(t, "foreign", time.Hour)
	impostor := ng.DeepCopy()
	impostor.UID = "uid-of-a-deleted-group"
	inst := launch(t, impostor)
	other := launch(t, ng)
	patchAnnotation(t, other.NodeName, v1alpha1.AnnotationLaunchedBy, "")
	r, clk, _, _ := reconciler()
	clk.Step(time.Hour)
	for _, name := range []string{inst.NodeName, other.NodeName} {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err != nil {
			t.Errorf("node %s without the group's owner mark: %v, want it kept", name, err)
		}
	}
}

func reconciler() (*launchtimeout.Reconciler, *clocktesting.FakeClock, *state.Offerings, *fakes.Recorder) {
	clk := clocktesting.NewFakeClock(time.Now())
	offerings := state.NewOfferings(clk, time.Hour)
	events := &fakes.Recorder{}
	r := &launchtimeout.Reconciler{Client: env.Client, Cloud: kwok.New(env.Client, clk), Offerings: offerings, Recorder: events,
		Clock: clk, MaxProvisionTime: 15 * time.Minute}
	return r, clk, offerings, events
}

// createGroup creates a NodeGroup on the API server (so it has a UID).
func createGroup(t *testing.T, name string, delay time.Duration) *v1alpha1.NodeGroup {
	t.Helper()
	ng := b.NodeGroup(name, b.LaunchDelay(metav1.Duration{Duration: delay}))
	if err := env.Client.Create(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	return ng
}

func launch(t *testing.T, ng *v1alpha1.NodeGroup) *cloudprovider.Instance {
	t.Helper()
	inst, err := kwok.New(env.Client, clock.RealClock{}).Create(context.Background(), cloudprovider.CreateRequest{NodeGroup: ng,
		Offering: cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func patchLabel(t *testing.T, node, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if err := env.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func patchAnnotation(t *testing.T, node, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := env.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestLeavesReadyNodesBerthDidNotLaunchUnlabelled: a Ready node with a
// group label but no owner mark is not labelled initialized (berth may not
// write it; the reconcile would fail for ever).
func TestLeavesReadyNodesBerthDidNotLaunchUnlabelled(t *testing.T) {
	ctx := context.Background()
	n := b.Node("foreign-ready", "2", "8Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "someone"))
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	// A patch, not an update: the controller-manager may have written the
	// node since it was created.
	before := n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Patch(ctx, n, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	r, _, _, _ := reconciler()
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(n)}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil || n.Labels[v1alpha1.LabelInitialized] != "" {
		t.Errorf("node without the owner mark: %v, labels %v; want it left unlabelled", err, n.Labels)
	}
}
