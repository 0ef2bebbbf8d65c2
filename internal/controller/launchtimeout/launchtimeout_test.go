package launchtimeout_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
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
	ng := b.NodeGroup("slow", b.LaunchDelay(metav1.Duration{Duration: time.Hour}))
	inst, err := kwok.New(env.Client, clock.RealClock{}).Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng,
		Offering: cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	offerings := state.NewOfferings(clk, time.Hour)
	events := &fakes.Recorder{}
	r := &launchtimeout.Reconciler{Client: env.Client, Cloud: kwok.New(env.Client, clk), Offerings: offerings, Recorder: events,
		Clock: clk, MaxProvisionTime: 15 * time.Minute}
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
