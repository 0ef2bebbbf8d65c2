package disruption_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// TestARoundWaitsForTheCacheToShowItsOwnTaint: three empty nodes, a
// budget of one, consolidateAfter 30 s. A round drains one; the next reads
// nodes from a cache that does not show that taint yet (the informer
// behind a busy API server). It starts nothing: planned on that view, the
// drained node looked like none (its countdown started again), the budget
// looked free, and a second node was drained, past the budget. Once the
// cache shows the taint, rounds go on.
func TestARoundWaitsForTheCacheToShowItsOwnTaint(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-unseen", 3)
	one := intstr.FromInt32(1)
	ng := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.group), ng); err != nil {
		t.Fatal(err)
	}
	ng.Spec.Disruption.Budget = &one
	ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 30 * time.Second}
	if err := env.Client.Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	f.run() // the countdowns start
	stale := &corev1.NodeList{}
	if err := env.Client.List(ctx, stale, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group.Name}); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(31 * time.Second)
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v, want one node (the budget)", res.Started)
	}
	fresh := f.ctrl.Client
	f.ctrl.Client = interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if nodes, ok := l.(*corev1.NodeList); ok {
				stale.DeepCopyInto(nodes)
				return nil
			}
			return c.List(ctx, l, opts...)
		}})
	f.clk.Step(time.Second)
	res = f.run()
	if len(res.Started) != 0 || !res.Waited {
		t.Errorf("round on a cache that does not show its taint: started %v, waited %v; want nothing started, the round waiting", res.Started, res.Waited)
	}
	draining := 0
	for _, name := range f.nodes {
		if n := f.node(name); n != nil && tainted(n) {
			draining++
		}
	}
	if draining != 1 {
		t.Errorf("%d nodes draining, want 1 (the budget)", draining)
	}
	f.ctrl.Client = fresh
	if res := f.run(); res.Waited {
		t.Error("the round still waits once the cache shows the taint")
	}
}
