package nodegroup_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/nodegroup"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestStatusCountsNodesPriceAndLaunchFailures: Reconcile against the real
// API server fills the status a user reads with kubectl.
func TestStatusCountsNodesPriceAndLaunchFailures(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("status", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.Spot("zone-a", "0.04")))
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	for i, ct := range []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeSpot} {
		n := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: ct}, []string{"status-a", "status-b"}[i])
		if i == 0 {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(time.Now())
	offerings := state.NewOfferings(clk, 3*time.Minute)
	holds := state.NewHolds()
	r := &nodegroup.Reconciler{Client: env.Client, Failures: offerings, Holds: holds, Clock: clk}
	reconcileOnce := func() *v1alpha1.NodeGroup {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "status"}}); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.NodeGroup{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "status"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := reconcileOnce()
	st := got.Status
	if st.Nodes != 2 || st.ReadyNodes != 1 {
		t.Errorf("nodes %d ready %d, want 2 and 1", st.Nodes, st.ReadyNodes)
	}
	if cpu := st.Resources[corev1.ResourceCPU]; cpu.Value() != 4 {
		t.Errorf("resources cpu %s, want 4", cpu.String())
	}
	if st.PricePerHour != "0.1400" {
		t.Errorf("price %q, want 0.1400", st.PricePerHour)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionLaunchFailing); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("LaunchFailing %+v, want False", c)
	}

	offerings.MarkUnavailable(scaleup.Offering{NodeGroup: "status", InstanceType: "m-2", Zone: "zone-a", CapacityType: "spot"}, state.FailureInsufficientCapacity, "no spot capacity")
	got = reconcileOnce()
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionLaunchFailing)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "InsufficientCapacity" || !strings.Contains(c.Message, "m-2/zone-a/spot") || !strings.Contains(c.Message, "no spot capacity") {
		t.Errorf("LaunchFailing after a failure for want of capacity: %+v", c)
	}
	if u := got.Status.UnavailableOfferings; len(u) != 1 || u[0].Reason != "InsufficientCapacity" {
		t.Errorf("unavailableOfferings %+v, want the spot offering's reason InsufficientCapacity", u)
	}
	// A node of another offering that never turned Ready: the failures'
	// reasons differ, and the condition says only that launches failed.
	offerings.MarkLaunchFailed(scaleup.Offering{NodeGroup: "status", InstanceType: "m-2", Zone: "zone-a", CapacityType: "on-demand"}, "node never Ready", clk.Now())
	got = reconcileOnce()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionLaunchFailing); c == nil || c.Reason != "LaunchFailed" {
		t.Errorf("LaunchFailing with a capacity failure and a timed out launch: %+v, want reason LaunchFailed", c)
	}
	reasons := map[v1alpha1.CapacityType]string{}
	for _, u := range got.Status.UnavailableOfferings {
		reasons[u.CapacityType] = u.Reason
	}
	if want := map[v1alpha1.CapacityType]string{v1alpha1.CapacityTypeSpot: "InsufficientCapacity", v1alpha1.CapacityTypeOnDemand: "LaunchTimedOut"}; !maps.Equal(reasons, want) {
		t.Errorf("unavailableOfferings' reasons %v, want %v", reasons, want)
	}

	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionScaleDownSuspended); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("ScaleDownSuspended with a failure but no pending pod: %+v, want False", c)
	}
	// A launch for a pending pod failed in this group and the pod still
	// waits: scale-down is suspended, naming the pod and the failure.
	waits := types.NamespacedName{Namespace: "default", Name: "waits"}
	holds.LaunchFailed(waits, "status", "no spot capacity")
	holds.Publish(map[types.NamespacedName]bool{waits: true}, nil)
	got = reconcileOnce()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionScaleDownSuspended); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != nodegroup.ReasonPendingAfterLaunchFailure || !strings.Contains(c.Message, "pending pod default/waits") || !strings.Contains(c.Message, "no spot capacity") {
		t.Errorf("ScaleDownSuspended after a failed launch for a waiting pod: %+v", c)
	}
	// Once the pod no longer waits, the suspension ends.
	holds.Publish(nil, nil)
	got = reconcileOnce()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionScaleDownSuspended); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("ScaleDownSuspended after the pod was scheduled: %+v, want False", c)
	}

	clk.Step(4 * time.Minute)
	got = reconcileOnce()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionLaunchFailing); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("LaunchFailing after the failure expired: %+v, want False", c)
	}
}

// TestStaleCacheIsNotAnError: when the reconciler reads an outdated copy
// (its cache lags behind the API server), the status write conflicts; that
// is not reported as a reconcile error with a stack trace, and the next
// reconcile with a fresh copy writes the status.
func TestStaleCacheIsNotAnError(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("stale", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	stale := ng.DeepCopy() // what a lagging cache still holds
	fresh := ng.DeepCopy()
	fresh.Labels = map[string]string{"team": "a"}
	if err := env.Client.Update(ctx, fresh); err != nil { // someone else changes it meanwhile
		t.Fatal(err)
	}
	n := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, "stale-a")
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	lagging := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if ng, ok := obj.(*v1alpha1.NodeGroup); ok {
				stale.DeepCopyInto(ng)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	clk := clocktesting.NewFakeClock(time.Now())
	offerings := state.NewOfferings(clk, time.Minute)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "stale"}}
	// The newer version's watch event reconciles the node group again; here
	// the test does that by hand.
	if _, err := (&nodegroup.Reconciler{Client: lagging, Failures: offerings, Clock: clk}).Reconcile(ctx, req); err != nil {
		t.Fatalf("a stale read was reported as an error: %v", err)
	}
	if _, err := (&nodegroup.Reconciler{Client: env.Client, Failures: offerings, Clock: clk}).Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Nodes != 1 || got.Labels["team"] != "a" {
		t.Errorf("after a fresh reconcile: %d nodes in status, labels %v; want 1 node and the other writer's label kept", got.Status.Nodes, got.Labels)
	}
}

// TestASuspendedStandbyNodeCostsItsStoppedPrice: a group's status and
// price metric count a suspended standby node at its offering's stopped
// price (0.008), as its Headroom does, not its running price (0.10): the
// group said 0.1000 where the Headroom said 0.008.
func TestASuspendedStandbyNodeCostsItsStoppedPrice(t *testing.T) {
	ctx := context.Background()
	offering := b.OnDemand("zone-a", "0.10")
	offering.StoppedPricePerHour = "0.008"
	ng := b.NodeGroup("status-stopped", b.InstanceType("m-2", "2", "8Gi", offering))
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ng) })
	n := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, "status-stopped-a")
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintStandby, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	n.Annotations[v1alpha1.AnnotationSuspendedAt] = time.Now().UTC().Format(time.RFC3339)
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	clk := clocktesting.NewFakeClock(time.Now())
	r := &nodegroup.Reconciler{Client: env.Client, Failures: state.NewOfferings(clk, 3*time.Minute), Holds: state.NewHolds(), Clock: clk}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: ng.Name}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ng.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.PricePerHour != "0.0080" {
		t.Errorf("price %q, want 0.0080 (the stopped price of its one suspended node)", got.Status.PricePerHour)
	}
}

// TestANewLeaderKeepsTheOfferingsTheLastOneAvoided: the status says an
// offering failed and is avoided for 3 more minutes; a controller started
// afresh (its offerings store empty) reconciles the group before the
// provisioner's first round: the status keeps the offering, and the store
// the provisioner launches from avoids it. Before, the status was written
// empty, and the provisioner, reading it next, restored nothing. The
// failure's reason is kept too.
func TestANewLeaderKeepsTheOfferingsTheLastOneAvoided(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("restart", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.Spot("zone-a", "0.04")))
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	until := metav1.NewTime(clk.Now().Add(3 * time.Minute).Truncate(time.Second))
	ng.Status.UnavailableOfferings = []v1alpha1.UnavailableOffering{{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeSpot,
		Until: until, Streak: 2, Message: "no spot capacity", Reason: "InsufficientCapacity"}}
	if err := env.Client.Status().Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	offerings := state.NewOfferings(clk, 3*time.Minute)
	r := &nodegroup.Reconciler{Client: env.Client, Failures: offerings, Holds: state.NewHolds(), Clock: clk}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "restart"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "restart"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.UnavailableOfferings) != 1 || got.Status.UnavailableOfferings[0].CapacityType != v1alpha1.CapacityTypeSpot {
		t.Errorf("unavailableOfferings after a new leader's first reconcile = %+v, want the spot offering kept", got.Status.UnavailableOfferings)
	}
	if u := offerings.Unavailable(); len(u) != 1 || u[0].CapacityType != "spot" {
		t.Errorf("offerings the new leader avoids = %v, want the spot offering", u)
	}
	// The status keeps no time of the failure: the condition does not
	// give its expiry as the time it failed.
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionLaunchFailing)
	want := "m-2/zone-a/spot before a restart, avoided until " + until.UTC().Format(time.RFC3339)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, want) || c.Reason != "InsufficientCapacity" {
		t.Errorf("LaunchFailing %+v, want True for InsufficientCapacity (the reason the status kept) saying %q", c, want)
	}
}
