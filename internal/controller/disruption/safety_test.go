package disruption_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// createPod creates a pod in the fixture's namespace and removes it when
// the test ends.
func (f *fixture) createPod(p *corev1.Pod) *corev1.Pod {
	f.t.Helper()
	p.Namespace = f.ns
	p.UID = ""
	if err := env.Client.Create(context.Background(), p); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	return p
}

// TestAnUnplaceablePodDoesNotFreezeScaleDown: a pod no node and no group
// can host (a selector nothing has) waits for ever; an idle node is still
// removed.
func TestAnUnplaceablePodDoesNotFreezeScaleDown(t *testing.T) {
	f := setup(t, "sd-stuck", 1)
	p := f.createPod(b.Pod("stuck", b.CPU("100m"), b.NodeSelector("disk", "nothing-has-it")))
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)
		return err == nil && podutil.FailedToSchedule(p), "the scheduler has not tried the pod yet", err
	})
	res := f.run()
	if len(res.Started) != 1 || res.Started[0] != f.nodes[0] {
		t.Fatalf("started %v, want the idle node %s although an unplaceable pod waits", res.Started, f.nodes[0])
	}
	if len(res.Plan.Unplaced) != 1 || res.Plan.Unplaced[0].Name != "stuck" {
		t.Errorf("plan's unplaced pods %v, want the stuck pod reported", res.Plan.Unplaced)
	}
}

// holds is a fixed set of holds.
type holds struct {
	published bool
	all       map[string]state.Hold
}

func (h holds) All() map[string]state.Hold { return h.all }
func (h holds) Published() bool            { return h.published }

// TestRemovalsWaitWhileBerthBringsCapacityToTheGroup: no removal starts
// in a group where a launch for a waiting pod is under way (or failed),
// nor before the provisioner's first round; then it does.
func TestRemovalsWaitWhileBerthBringsCapacityToTheGroup(t *testing.T) {
	f := setup(t, "sd-held", 1)
	hold := state.Hold{Pod: types.NamespacedName{Namespace: "default", Name: "x"}, Reason: state.HoldLaunching, Message: "launching for default/x"}
	for name, h := range map[string]holds{
		"before the provisioner's first round":  {},
		"while a launch for a pod is under way": {published: true, all: map[string]state.Hold{f.group.Name: hold}},
	} {
		f.ctrl.Holds = h
		if res := f.run(); len(res.Started) != 0 {
			t.Fatalf("%s: started %v, want nothing", name, res.Started)
		}
	}
	f.ctrl.Holds = holds{published: true, all: map[string]state.Hold{"another-group": hold}}
	if res := f.run(); len(res.Started) != 1 {
		t.Fatalf("with only another group held: started %v, want the idle node", res.Started)
	}
}

// TestABarePodBoundDuringTheDrainStopsIt: after the node is tainted, a bare
// pod that tolerates every taint is bound to it (as debug pods and some
// agents are). It is not evicted: the removal is given up, the node
// untainted, and the event names the pod and the rule.
func TestABarePodBoundDuringTheDrainStopsIt(t *testing.T) {
	f := setup(t, "sd-late", 2)
	res := f.run()
	if len(res.Started) == 0 {
		t.Fatal("nothing started: want an idle node drained")
	}
	victim := res.Started[0]
	f.createPod(b.Pod("debug", b.CPU("100m"), b.NodeName(victim),
		func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }))
	res = f.run()
	if !contains(res.GivenUp, victim) || contains(res.Removed, victim) {
		t.Fatalf("round after a bare pod landed: given up %v, removed %v; want %s given up", res.GivenUp, res.Removed, victim)
	}
	p := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "debug"}, p); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the bare pod after the round: %v (deleting: %v); want it untouched", err, p.DeletionTimestamp != nil)
	}
	if n := f.node(victim); n == nil || tainted(n) {
		t.Fatalf("node %s: want it kept and untainted", victim)
	}
	if !hasEvent(f, victim, disruption.ReasonDrainStopped, f.ns+"/debug", "NotReplicated") {
		t.Errorf("events on %s: %+v, want DrainStopped naming %s/debug and NotReplicated", victim, f.events.For(victim), f.ns)
	}
}

// TestAPodMarkedDoNotDisruptAfterTheDecisionKeepsItsNode: a pod the
// removal planned to evict is annotated do-not-disrupt while its node
// drains (its PDB held the eviction back): the drain stops and the pod is
// not evicted.
func TestAPodMarkedDoNotDisruptAfterTheDecisionKeepsItsNode(t *testing.T) {
	f := setup(t, "sd-dnd", 2)
	victim := f.drainHeldByPDB()
	if v := f.node(victim).Labels[corev1.LabelNodeExcludeBalancers]; v != nodeutil.ExcludedFromLoadBalancers {
		t.Errorf("draining node %s: label %s=%q, want %q (out of Services' load balancers while its pods are evicted)",
			victim, corev1.LabelNodeExcludeBalancers, v, nodeutil.ExcludedFromLoadBalancers)
	}
	f.run() // the eviction is refused; the pod stays
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns), client.MatchingFields{"spec.nodeName": victim}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods on %s: %v %d, want one", victim, err, len(pods.Items))
	}
	p := &pods.Items[0]
	patch := client.MergeFrom(p.DeepCopy())
	p.Annotations = map[string]string{v1alpha1.AnnotationDoNotDisrupt: "true"}
	if err := env.Client.Patch(context.Background(), p, patch); err != nil {
		t.Fatal(err)
	}
	f.pdb(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 1)
	res := f.run()
	if !contains(res.GivenUp, victim) {
		t.Fatalf("given up %v, want %s", res.GivenUp, victim)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the do-not-disrupt pod: %v (deleting %v), want it untouched", err, p.DeletionTimestamp != nil)
	}
	if !hasEvent(f, victim, disruption.ReasonDrainStopped, p.Name, "DoNotDisrupt") {
		t.Errorf("events on %s: %+v, want DrainStopped naming the pod and DoNotDisrupt", victim, f.events.For(victim))
	}
	if v, ok := f.node(victim).Labels[corev1.LabelNodeExcludeBalancers]; ok {
		t.Errorf("node %s kept: label %s=%q, want it gone (back in the load balancers)", victim, corev1.LabelNodeExcludeBalancers, v)
	}
}

// TestAPodTheCacheHasNotShownKeepsTheNode: the controller's cache has not
// seen a pod bound to the draining node yet; the fresh read before the
// deletion finds it, and the node is not deleted under it.
func TestAPodTheCacheHasNotShownKeepsTheNode(t *testing.T) {
	f := setup(t, "sd-lag", 2)
	res := f.run()
	if len(res.Started) == 0 {
		t.Fatal("nothing started: want an idle node drained")
	}
	victim := res.Started[0]
	f.createPod(b.Pod("late", b.CPU("100m"), b.NodeName(victim), b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true"),
		func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }))
	lagging := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if pods, ok := list.(*corev1.PodList); ok {
				kept := pods.Items[:0]
				for _, p := range pods.Items {
					if p.Name != "late" {
						kept = append(kept, p)
					}
				}
				pods.Items = kept
			}
			return nil
		}})
	f.ctrl.Client = lagging
	f.ctrl.APIReader = env.Client
	f.run()
	if n := f.node(victim); n == nil {
		t.Fatalf("node %s was deleted while a pod the cache had not shown ran on it", victim)
	}
	p := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "late"}, p); err != nil {
		t.Fatalf("the late pod: %v", err)
	}
}

// TestANodeOptedOutAfterTheCacheWasReadIsNotRemoved: an idle node
// drains; its owner annotates it do-not-disrupt, which the controller's
// cache has not shown when the node is to be removed. The fresh read
// before the removal sees it: the node stays, and the next round stops
// the drain.
func TestANodeOptedOutAfterTheCacheWasReadIsNotRemoved(t *testing.T) {
	f := setup(t, "sd-optout-lag", 2)
	res := f.run()
	if len(res.Started) == 0 {
		t.Fatal("nothing started: want an idle node drained")
	}
	victim := res.Started[0]
	f.patchNode(victim, func(n *corev1.Node) { n.Annotations[v1alpha1.AnnotationDoNotDisrupt] = "true" })
	hide := func(n *corev1.Node) { delete(n.Annotations, v1alpha1.AnnotationDoNotDisrupt) }
	lagging := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if n, ok := obj.(*corev1.Node); ok {
				hide(n)
			}
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if nodes, ok := list.(*corev1.NodeList); ok {
				for i := range nodes.Items {
					hide(&nodes.Items[i])
				}
			}
			return nil
		}})
	f.ctrl.Client, f.ctrl.APIReader = lagging, env.Client
	res = f.run()
	if contains(res.Removed, victim) || f.node(victim) == nil {
		t.Fatalf("node %s was removed after its owner opted it out (removed %v)", victim, res.Removed)
	}
	f.ctrl.Client = env.WatchingClient(t)
	if res := f.run(); !contains(res.GivenUp, victim) {
		t.Errorf("given up %v once the cache shows the opt-out, want %s", res.GivenUp, victim)
	}
}

// TestAFailingDrainDoesNotStopTheOthers: two drains time out in one round,
// their pods held by their budget; untainting the first fails; the second
// is still given up.
func TestAFailingDrainDoesNotStopTheOthers(t *testing.T) {
	f := setup(t, "sd-isolate", 2)
	f.deployment(2)
	f.pdb(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 0)
	for _, name := range f.nodes {
		n := f.node(name)
		patch := client.MergeFrom(n.DeepCopy())
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
		n.Annotations[v1alpha1.AnnotationDisruptionStarted] = f.clk.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
		if err := env.Client.Patch(context.Background(), n, patch); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(f.nodes)
	broken := f.nodes[0] // the first the round visits
	f.ctrl.Client = interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == broken {
				return apierrors.NewServiceUnavailable("injected")
			}
			return c.Patch(ctx, obj, patch, opts...)
		}})
	res, err := f.ctrl.RunOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), broken) {
		t.Errorf("round error %v, want one naming node %s", err, broken)
	}
	if res == nil || !contains(res.GivenUp, f.nodes[1]) {
		t.Fatalf("given up %v, want %s given up despite %s's failure", res, f.nodes[1], broken)
	}
	if n := f.node(f.nodes[1]); n == nil || tainted(n) {
		t.Errorf("node %s: want it untainted (and not drained again at once)", f.nodes[1])
	}
}

// TestADrainOfARecreatedGroupIsReleased: the node group is deleted and
// created again (a new UID) while its node drains: the node is not the new
// group's to remove; berth untaints it and it does not count against the
// new group's budget.
func TestADrainOfARecreatedGroupIsReleased(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-recreated", 2)
	res := f.run()
	if len(res.Started) == 0 {
		t.Fatal("nothing started")
	}
	victim := res.Started[0]
	old := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.group), old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	waitGone(t, old)
	fresh := f.group.DeepCopy()
	fresh.ResourceVersion, fresh.UID = "", ""
	if err := env.Client.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	res = f.run()
	if !contains(res.GivenUp, victim) {
		t.Fatalf("given up %v, want %s released", res.GivenUp, victim)
	}
	if n := f.node(victim); n == nil || tainted(n) {
		t.Errorf("node %s: want it kept and untainted", victim)
	}
}

func waitGone(t *testing.T, o client.Object) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s still there", o.GetName())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasEvent(f *fixture, object, reason string, words ...string) bool {
	for _, e := range f.events.For(object) {
		if e.Reason != reason {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(e.Message, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestADeletedGroupsNodesAreDrained: a NodeGroup deleted with the default
// deletionPolicy (Drain; its finalizer holds it) has its only node drained
// and removed, although the node's pod fits nowhere else.
func TestADeletedGroupsNodesAreDrained(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-deleted", 1)
	f.deployment(1)
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.group), g); err != nil {
		t.Fatal(err)
	}
	g.Finalizers = append(g.Finalizers, v1alpha1.FinalizerNodes) // what the nodegroup controller adds
	g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Hour}
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(g), g)
		g.Finalizers = nil
		_ = env.Client.Update(context.Background(), g)
	})
	if res := f.run(); len(res.Started) != 0 {
		t.Fatalf("started %v before the group was deleted, want nothing (its pod fits nowhere)", res.Started)
	}
	if err := env.Client.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	victim := f.nodes[0]
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		f.run()
		return f.node(victim) == nil, "node " + victim + " of the deleted group not removed yet", nil
	})
	if !hasEvent(f, victim, disruption.ReasonDisrupting, "node group is being deleted") {
		t.Errorf("events on %s: %+v, want Disrupting saying the group is deleted", victim, f.events.For(victim))
	}
}

// heldRemovals is a provider that holds removals half-done (as a Cluster
// API Machine marked while its replicas wait) for the nodes marked, and
// records which of them berth undoes.
type heldRemovals struct {
	cloudprovider.CloudProvider
	marked, cancelled []string
}

func (c *heldRemovals) Removing(context.Context, *v1alpha1.NodeGroup) ([]string, error) {
	return c.marked, nil
}

func (c *heldRemovals) CancelRemoval(_ context.Context, name string) error {
	c.cancelled = append(c.cancelled, name)
	return nil
}

// TestAStaleRemovalIsUndoneButNotAnotherControllersRemoval: the provider
// holds two removals half-done. One is of a node that was up and that no
// drain holds any more (a drain given up before a restart): berth undoes
// it. The other is of a node never Ready, which the launch timeout is
// removing: berth leaves it (undone, the launch timeout marked it again
// each time, and an undo racing its replica change could leave the
// replicas lowered for no mark).
func TestAStaleRemovalIsUndoneButNotAnotherControllersRemoval(t *testing.T) {
	f := setup(t, "sd-cancel", 2)
	stale, booting := f.nodes[0], f.nodes[1]
	for _, name := range f.nodes { // no new drain in the round
		f.patchNode(name, func(n *corev1.Node) { n.Annotations[v1alpha1.AnnotationDoNotDisrupt] = "true" })
	}
	f.patchNode(booting, func(n *corev1.Node) { delete(n.Labels, v1alpha1.LabelInitialized) })
	// A Machine without a Node (the provisioner removes it: it never got
	// infrastructure) is no drain to undo either.
	cloud := &heldRemovals{CloudProvider: f.ctrl.Cloud, marked: []string{stale, booting, "md-0-stuck-machine"}}
	f.ctrl.Cloud = cloud
	f.run()
	if !slices.Equal(cloud.cancelled, []string{stale}) {
		t.Errorf("removals undone: %v, want only the stale one of %s (not the launch timeout's of %s, nor the stuck Machine's)", cloud.cancelled, stale, booting)
	}
	if !hasEventOn(f, stale, disruption.ReasonRemovalCancelled) {
		t.Errorf("no %s event on %s: %+v", disruption.ReasonRemovalCancelled, stale, f.events.For(stale))
	}
}
