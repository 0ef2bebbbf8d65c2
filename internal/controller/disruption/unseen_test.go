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

// TestARoundReadsItsOwnTaintOverAStaleCache: three empty nodes, a budget
// of one, consolidateAfter 30 s. A round drains one; the next reads nodes
// from a cache that does not show that taint yet (the informer behind a
// busy API server). It starts no other drain: planned on that view alone,
// the drained node looked like none (its countdown started again), the
// budget looked free, and a second node was drained, past the budget.
func TestARoundReadsItsOwnTaintOverAStaleCache(t *testing.T) {
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
	f.ctrl.Client = staleNodes(t, stale)
	f.clk.Step(time.Second)
	res = f.run()
	if len(res.Started) != 0 {
		t.Errorf("round on a cache that does not show its taint: started %v, want nothing more (the budget)", res.Started)
	}
	taken := 0 // draining, or removed already (the drained node was empty)
	for _, name := range f.nodes {
		if n := f.node(name); n == nil || tainted(n) {
			taken++
		}
	}
	if taken != 1 {
		t.Errorf("%d nodes draining or removed, want 1 (the budget)", taken)
	}
	f.ctrl.Client = fresh
	f.run()
}

// TestADrainGivenUpOverAStaleCacheEvictsNothing: a drain starts; a pod
// of the node opts out (do-not-disrupt) and the drain is given up (its
// taint taken off); the pod opts in again. The next round reads nodes from
// a cache that still shows the node as the drain left it a moment ago
// (tainted, started just now). It evicts nothing from the node: planned on
// that view alone, it took the drain for one going on and evicted its pod.
func TestADrainGivenUpOverAStaleCacheEvictsNothing(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-unseen-stop", 2)
	f.deployment(2)
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v, want one node", res.Started)
	}
	victim := res.Started[0]
	stale := &corev1.NodeList{}
	if err := env.Client.List(ctx, stale, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group.Name}); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(f.ns), client.MatchingFields{"spec.nodeName": victim}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods on %s: %d, %v; want 1", victim, len(pods.Items), err)
	}
	pod := &pods.Items[0]
	optOut := func(v string) {
		t.Helper()
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if v == "" {
			delete(pod.Annotations, v1alpha1.AnnotationDoNotDisrupt)
		} else {
			pod.Annotations[v1alpha1.AnnotationDoNotDisrupt] = v
		}
		if err := env.Client.Patch(ctx, pod, patch); err != nil {
			t.Fatal(err)
		}
	}
	optOut("true")
	if res := f.run(); !contains(res.GivenUp, victim) {
		t.Fatalf("given up %v, want %s", res.GivenUp, victim)
	}
	optOut("")
	f.ctrl.Client = staleNodes(t, stale)
	f.clk.Step(time.Second)
	_, _ = f.ctrl.RunOnce(ctx)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("pod %s of %s, whose drain was given up: %v, deleting %v; want it left", pod.Name, victim, err, pod.DeletionTimestamp != nil)
	}
	if n := f.node(victim); n == nil || tainted(n) {
		t.Errorf("node %s: want it there and untainted", victim)
	}
}

// staleNodes is a client whose node lists give stale (an informer cache
// behind the API server); everything else is read and written as is.
func staleNodes(t *testing.T, stale *corev1.NodeList) client.Client {
	return interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if nodes, ok := l.(*corev1.NodeList); ok {
				stale.DeepCopyInto(nodes)
				return nil
			}
			return c.List(ctx, l, opts...)
		}})
}
