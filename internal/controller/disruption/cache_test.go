package disruption_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestARoundNeverChangesTheCachesNodes: the controller reads the nodes of
// the manager's informer cache without a copy; a round that taints nodes,
// records their drain and writes their condition changes copies of its
// own, never the cache's objects (every other reader of the cache would
// see a taint the API server does not have, and the informer would not
// see the change as a change).
func TestARoundNeverChangesTheCachesNodes(t *testing.T) {
	f := setup(t, "sd-cache", 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", LeaderElection: false})
	if err != nil {
		t.Fatal(err)
	}
	c := disruption.New(disruption.Deps{Client: mgr.GetClient(), APIReader: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}),
		Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now())}, disruption.Options{Interval: time.Hour})
	if err := c.Register(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	store := inf.(interface{ GetStore() toolscache.Store }).GetStore()
	cached := map[string]*corev1.Node{}
	before := map[string]*corev1.Node{}
	for _, name := range f.nodes {
		obj, ok, err := store.GetByKey(name)
		if err != nil || !ok {
			t.Fatalf("node %s not in the cache (%v)", name, err)
		}
		cached[name] = obj.(*corev1.Node)
		before[name] = cached[name].DeepCopy()
	}

	res, err := c.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Started) != 2 {
		t.Fatalf("drains started %v, want both empty nodes", res.Started)
	}
	for _, name := range f.nodes {
		if !tainted(f.node(name)) {
			t.Errorf("node %s is not tainted on the API server", name)
		}
		if !equality.Semantic.DeepEqual(cached[name], before[name]) {
			t.Errorf("the round changed the cache's node %s: taints %v, annotations %v, conditions %d (before: %v, %v, %d)", name,
				cached[name].Spec.Taints, cached[name].Annotations, len(cached[name].Status.Conditions),
				before[name].Spec.Taints, before[name].Annotations, len(before[name].Status.Conditions))
		}
	}
}
