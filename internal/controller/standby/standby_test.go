package standby_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/standby"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

type fixture struct {
	t     *testing.T
	group string
	r     *standby.Reconciler
}

func (f *fixture) reconcile() {
	f.t.Helper()
	if _, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: f.group}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) nodes() []corev1.Node {
	f.t.Helper()
	list := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), list, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group}); err != nil {
		f.t.Fatal(err)
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if n.DeletionTimestamp == nil { // deleted: KWOK removes it a moment later
			out = append(out, n)
		}
	}
	return out
}

// bootAll waits for KWOK to turn the group's nodes Ready and marks them
// initialized, as the launch timeout controller does.
func (f *fixture) bootAll() {
	f.t.Helper()
	ctx := context.Background()
	expect.Eventually(f.t, time.Minute, func(context.Context) (bool, string, error) {
		for _, n := range f.nodes() {
			if !nodeutil.Ready(&n) {
				return false, "node " + n.Name + " not Ready", nil
			}
		}
		return true, "", nil
	})
	for _, n := range f.nodes() {
		patch := client.MergeFrom(n.DeepCopy())
		n.Labels[v1alpha1.LabelInitialized] = "true"
		if err := env.Client.Patch(ctx, &n, patch); err != nil {
			f.t.Fatal(err)
		}
	}
}

func setup(t *testing.T, name string, count int32) (*fixture, *v1alpha1.Headroom) {
	t.Helper()
	ctx := context.Background()
	ng := b.NodeGroup(name, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.50")))
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{name}},
		Units: &v1alpha1.HeadroomUnits{Count: 0, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		Standby: &v1alpha1.StandbyHeadroom{Count: count}}}
	for _, o := range []client.Object{ng, h} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, h)
		_ = env.Client.Delete(ctx, ng)
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: name})
	})
	r := &standby.Reconciler{Client: env.Client, APIReader: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}),
		Offerings: state.NewOfferings(clock.RealClock{}, time.Minute), Standby: state.NewStandby(), Recorder: &fakes.Recorder{}, Clock: clock.RealClock{}}
	return &fixture{t: t, group: name, r: r}, h
}

// TestStandbyNodesAreLaunchedSuspendedAndRemovedOnlyWhenIdle: 3 units of
// 1 cpu are kept on two 2-cpu nodes (cheapest per unit), suspended once
// Ready and initialized; with the count lowered to 0, the node a pod was
// bound to is resumed and the other deleted; with the Headroom gone, its
// idle standby node goes, the resumed one stays.
func TestStandbyNodesAreLaunchedSuspendedAndRemovedOnlyWhenIdle(t *testing.T) {
	ctx := context.Background()
	f, h := setup(t, "standby-keep", 3)
	f.reconcile()
	nodes := f.nodes()
	if len(nodes) != 2 {
		t.Fatalf("%d standby nodes for 3 units of 1 cpu, want 2 of m-2 (cheapest per unit)", len(nodes))
	}
	for _, n := range nodes {
		if !nodeutil.Standby(&n) || n.Labels[v1alpha1.LabelInstanceType] != "m-2" || n.Annotations[v1alpha1.AnnotationStandbyFor] != h.Name {
			t.Errorf("node %s: standby %v, type %s, for %q", n.Name, nodeutil.Standby(&n), n.Labels[v1alpha1.LabelInstanceType], n.Annotations[v1alpha1.AnnotationStandbyFor])
		}
	}
	f.reconcile() // booting: nothing more is launched
	if n := len(f.nodes()); n != 2 {
		t.Fatalf("%d nodes after a second reconcile while they boot, want 2", n)
	}
	f.bootAll()
	f.reconcile()
	for _, n := range f.nodes() {
		if !nodeutil.Suspended(&n) {
			t.Errorf("node %s is not suspended after it booted", n.Name)
		}
	}
	st, _ := f.r.Standby.Get(state.HeadroomKey(h.Name))
	if st.Units != 4 || st.Nodes != 2 || st.Booting != 0 || st.CostPerHour != "0.0200" {
		t.Errorf("status %+v, want 4 units on 2 suspended nodes at 0.0200/h", st)
	}
	before := names(f.nodes())
	f.reconcile() // 4 units for 3: removing a node would leave 2, so none goes
	f.reconcile()
	if after := names(f.nodes()); !maps.Equal(after, before) {
		t.Fatalf("nodes %v became %v: one node less would hold fewer than 3 units, none should go", before, after)
	}

	busy := f.nodes()[0].Name
	pod := b.Pod("tolerates-all", b.Namespace("default"), b.NoUID())
	pod.Spec.NodeName = busy
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pod) })
	h.Spec.Standby.Count = 0
	if err := env.Client.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.reconcile()
	}
	// The pod cannot run on the stopped machine: the node is resumed, out
	// of the standby tier; the idle one is deleted.
	left := f.nodes()
	if len(left) != 1 || left[0].Name != busy || nodeutil.Standby(&left[0]) {
		t.Fatalf("nodes left with count 0: %d, want only %s, which a pod was bound to, resumed", len(left), busy)
	}

	// Standby again, then the Headroom goes: its idle standby node goes,
	// the resumed node (an ordinary node now) stays.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(h), h); err != nil {
		t.Fatal(err)
	}
	h.Spec.Standby.Count = 2
	if err := env.Client.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	f.bootAll()
	f.reconcile()
	if n := len(f.nodes()); n != 2 {
		t.Fatalf("%d nodes with 2 standby units again, want the resumed one and a new standby node", n)
	}
	if err := env.Client.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	// The idle node goes once KWOK shows it stopped (suspended and not
	// Ready), which may take longer than a pass: the controller's requeue
	// tries again, and so does the test.
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		f.reconcile()
		if left := f.nodes(); len(left) != 1 || left[0].Name != busy {
			return false, fmt.Sprintf("the Headroom is gone: %d nodes left, want only %s (resumed, running a pod)", len(left), busy), nil
		}
		return true, "", nil
	})
	if _, ok := f.r.Standby.Get(state.HeadroomKey(h.Name)); ok {
		t.Error("the account of a deleted Headroom is kept")
	}
}

func names(nodes []corev1.Node) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		out[n.Name] = true
	}
	return out
}

// TestAStandbyNodeAPodLandsOnIsReleasedToRunningCapacity: a pod that
// tolerates the standby taint is bound to a booting standby node; the
// node is not suspended under it but leaves the standby tier (no taint,
// label or owner), and a new standby node holds the units.
func TestAStandbyNodeAPodLandsOnIsReleasedToRunningCapacity(t *testing.T) {
	ctx := context.Background()
	f, h := setup(t, "standby-release", 2)
	f.reconcile()
	nodes := f.nodes()
	if len(nodes) != 1 {
		t.Fatalf("%d standby nodes for 2 units of 1 cpu, want 1 of m-2", len(nodes))
	}
	landed := nodes[0].Name
	pod := b.Pod("tolerates-all", b.Namespace("default"), b.NoUID())
	pod.Spec.NodeName = landed
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	f.bootAll()
	f.reconcile()
	got := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: landed}, got); err != nil {
		t.Fatal(err)
	}
	if nodeutil.Standby(got) || nodeutil.Suspended(got) || got.Annotations[v1alpha1.AnnotationStandbyFor] != "" {
		t.Fatalf("node %s runs a pod: standby %v, suspended %v, for %q; want it released to running capacity",
			landed, nodeutil.Standby(got), nodeutil.Suspended(got), got.Annotations[v1alpha1.AnnotationStandbyFor])
	}
	if ev := f.r.Recorder.(*fakes.Recorder).For(landed); len(ev) == 0 || ev[len(ev)-1].Reason != standby.ReasonReleased {
		t.Errorf("events on %s: %+v, want the last to be %s", landed, ev, standby.ReasonReleased)
	}
	f.reconcile()
	var standbyNodes []string
	for _, n := range f.nodes() {
		if nodeutil.Standby(&n) && n.Annotations[v1alpha1.AnnotationStandbyFor] == h.Name {
			standbyNodes = append(standbyNodes, n.Name)
		}
	}
	if len(standbyNodes) != 1 || standbyNodes[0] == landed {
		t.Fatalf("standby nodes after the release: %v, want one new node holding the 2 units", standbyNodes)
	}
}

// TestASuspendedNodeAPodIsBoundToIsResumed: a pod that tolerates every
// taint is bound to a suspended standby node, whose stopped machine would
// never run it. berth resumes the node, which leaves the standby tier,
// and launches the units again on a new standby node.
func TestASuspendedNodeAPodIsBoundToIsResumed(t *testing.T) {
	ctx := context.Background()
	f, h := setup(t, "standby-bound", 2)
	f.reconcile()
	f.bootAll()
	f.reconcile()
	nodes := f.nodes()
	if len(nodes) != 1 || !nodeutil.Suspended(&nodes[0]) {
		t.Fatalf("want one suspended standby node, got %d", len(nodes))
	}
	landed := nodes[0].Name
	pod := b.Pod("bound-to-suspended", b.Namespace("default"), b.NoUID())
	pod.Spec.NodeName = landed
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	// A pass may miss the resume (one that loses its optimistic lock to
	// a concurrent write of the node, say): the controller's requeue tries
	// again, and so does the test.
	got := &corev1.Node{}
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		f.reconcile()
		if err := env.Client.Get(ctx, client.ObjectKey{Name: landed}, got); err != nil {
			return false, "", err
		}
		if nodeutil.Standby(got) || got.Annotations[v1alpha1.AnnotationResumedAt] == "" {
			return false, fmt.Sprintf("node %s holds a pod: standby %v, resumed-at %q; want it resumed and out of the standby tier",
				landed, nodeutil.Standby(got), got.Annotations[v1alpha1.AnnotationResumedAt]), nil
		}
		return true, "", nil
	})
	if ev := f.r.Recorder.(*fakes.Recorder).For(landed); len(ev) == 0 || ev[len(ev)-1].Reason != standby.ReasonReleased {
		t.Errorf("events on %s: %+v, want the last to be %s", landed, ev, standby.ReasonReleased)
	}
	f.reconcile()
	var standbyNodes []string
	for _, n := range f.nodes() {
		if nodeutil.Standby(&n) && n.Annotations[v1alpha1.AnnotationStandbyFor] == h.Name {
			standbyNodes = append(standbyNodes, n.Name)
		}
	}
	if len(standbyNodes) != 1 || standbyNodes[0] == landed {
		t.Fatalf("standby nodes after the resume: %v, want one new node holding the 2 units", standbyNodes)
	}
}

// TestASuspendedNodeOfAGoneHeadroomAPodIsBoundToIsResumed: the Headroom
// is deleted while a pod is bound to its suspended node; the node is not
// left stopped under the pod (nor deleted): it is resumed.
func TestASuspendedNodeOfAGoneHeadroomAPodIsBoundToIsResumed(t *testing.T) {
	ctx := context.Background()
	f, h := setup(t, "standby-gone", 2)
	f.reconcile()
	f.bootAll()
	f.reconcile()
	nodes := f.nodes()
	if len(nodes) != 1 || !nodeutil.Suspended(&nodes[0]) {
		t.Fatalf("want one suspended standby node, got %d", len(nodes))
	}
	landed := nodes[0].Name
	pod := b.Pod("bound-gone", b.Namespace("default"), b.NoUID())
	pod.Spec.NodeName = landed
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	if err := env.Client.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	got := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: landed}, got); err != nil {
		t.Fatalf("the node a pod was bound to: %v, want it kept and resumed", err)
	}
	if nodeutil.Standby(got) || got.Annotations[v1alpha1.AnnotationResumedAt] == "" {
		t.Fatalf("node %s holds a pod, its Headroom gone: standby %v, resumed-at %q; want it resumed",
			landed, nodeutil.Standby(got), got.Annotations[v1alpha1.AnnotationResumedAt])
	}
}

// TestStandbyNodesLeaveAGroupOutOfScopeOrBeingDeleted: a Headroom's scope
// moves from one group to another: its suspended node in the first goes
// and one is launched in the second. That group is then deleted (held by
// a finalizer, as berth's own holds it until its nodes are gone): its
// suspended node goes too, and none is launched.
func TestStandbyNodesLeaveAGroupOutOfScopeOrBeingDeleted(t *testing.T) {
	ctx := context.Background()
	f, h := setup(t, "standby-scope", 2)
	f.reconcile()
	f.bootAll()
	f.reconcile()
	if n := f.nodes(); len(n) != 1 || !nodeutil.Suspended(&n[0]) {
		t.Fatalf("want one suspended node in %s, got %d", f.group, len(n))
	}
	second := "standby-scope-b"
	ng := b.NodeGroup(second, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Finalizers = []string{"test.berth.dev/hold"}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(ng), ng)
		ng.Finalizers = nil
		_ = env.Client.Update(ctx, ng)
		_ = env.Client.Delete(ctx, ng)
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: second})
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(h), h); err != nil {
		t.Fatal(err)
	}
	h.Spec.Scope.NodeGroups = []string{second}
	if err := env.Client.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		got := &v1alpha1.Headroom{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(h), got) // the reconciler reads the cache
		return err == nil && len(got.Spec.Scope.NodeGroups) == 1 && got.Spec.Scope.NodeGroups[0] == second, "scope not moved yet", err
	})
	f.reconcile()
	f.reconcile()
	if n := len(f.nodes()); n != 0 {
		t.Fatalf("%d standby nodes left in %s, out of the Headroom's scope; want 0", n, f.group)
	}
	if ev := f.r.Recorder.(*fakes.Recorder).Events; !slices.ContainsFunc(ev, func(e fakes.Event) bool {
		return e.Reason == standby.ReasonRemoved && strings.Contains(e.Message, "no longer matches its node group") && strings.Contains(e.Message, "Headroom "+h.Name)
	}) {
		t.Errorf("events %+v: want the node out of scope removed, saying why", ev)
	}
	other := &fixture{t: t, group: second, r: f.r}
	if n := len(other.nodes()); n != 1 {
		t.Fatalf("%d standby nodes in %s, now the Headroom's scope; want 1", n, second)
	}
	other.bootAll()
	f.reconcile()
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		got := &v1alpha1.NodeGroup{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got)
		return err == nil && got.DeletionTimestamp != nil, "deletion not seen yet", err
	})
	f.reconcile()
	f.reconcile()
	if n := len(other.nodes()); n != 0 {
		t.Fatalf("%d standby nodes left in %s, which is being deleted; want 0", n, second)
	}
	if st, _ := f.r.Standby.Get(state.HeadroomKey(h.Name)); st.Units != 0 || !strings.Contains(st.Message, "no node group") {
		t.Errorf("status %+v: want 0 units and why none is launched", st)
	}
}

// TestStandbyUnitsLeaveRoomForTheGroupsDaemonSets: a DaemonSet of 500m
// runs on the group's nodes (it does not tolerate the standby taint, so
// its pod starts after a resume): a 2-cpu node then holds one unit of 1
// cpu, not two, and the 3 units are kept on one 8-cpu node (7 units at
// 0.50, cheaper per unit than 3 nodes of 2 cpu at 0.10 with one each).
// When the DaemonSet grows to leave no unit on it, the suspended node is
// replaced (here by none: no offering holds a unit any more).
func TestStandbyUnitsLeaveRoomForTheGroupsDaemonSets(t *testing.T) {
	ctx := context.Background()
	ds := b.DaemonSet("standby-ds-agent", b.Namespace("default"), b.CPU("500m"), b.NodeSelector(v1alpha1.LabelNodeGroup, "standby-ds"))
	if err := env.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ds) })
	f, h := setup(t, "standby-ds", 3)
	f.reconcile()
	nodes := f.nodes()
	if len(nodes) != 1 || nodes[0].Labels[v1alpha1.LabelInstanceType] != "m-8" {
		var types []string
		for _, n := range nodes {
			types = append(types, n.Labels[v1alpha1.LabelInstanceType])
		}
		t.Fatalf("standby nodes %v for 3 units beside a 500m DaemonSet, want one m-8", types)
	}
	f.reconcile()
	st, _ := f.r.Standby.Get(state.HeadroomKey(h.Name))
	if st.Units != 7 {
		t.Errorf("status %+v: want 7 units (8 cpu less the DaemonSet's 500m)", st)
	}

	// The DaemonSet grows to 7500m: the suspended node holds no unit any
	// more and goes; no offering holds one, and the status says so.
	f.bootAll()
	f.reconcile()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
		t.Fatal(err)
	}
	ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("7500m")
	if err := env.Client.Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if n := len(f.nodes()); n != 0 {
		t.Fatalf("%d standby nodes left that hold no unit beside a 7500m DaemonSet, want 0", n)
	}
	f.reconcile()
	if st, _ := f.r.Standby.Get(state.HeadroomKey(h.Name)); st.Units != 0 || !strings.Contains(st.Message, "holds one unit") {
		t.Errorf("status %+v: want 0 units and that no offering holds one", st)
	}
}

// TestStandbyNodesStayWithinTheClusterLimits: 4 units of 1 cpu want two
// 2-cpu standby nodes, but the cluster may have only one node more
// (--max-nodes-total), or only 2 cpu more (--cluster-max-cpu): one node
// is launched, and the Headroom is told why the rest is not kept, as
// the provisioner holds its own launches within those limits.
func TestStandbyNodesStayWithinTheClusterLimits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit func(nodes int, cpu resource.Quantity) scaleup.Limits
		why   string
	}{
		{"node cap", func(nodes int, _ resource.Quantity) scaleup.Limits {
			return scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{Total: nodes + 1}}
		}, "--max-nodes-total"},
		{"cpu limit", func(_ int, cpu resource.Quantity) scaleup.Limits {
			cpu.Add(resource.MustParse("3")) // room for one 2-cpu node, not two
			return scaleup.Limits{Resources: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("4000Gi")}}
		}, "--cluster-max-cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "standby-cap-" + strings.ReplaceAll(tc.name, " ", "-")
			f, h := setup(t, name, 4)
			nodes := &corev1.NodeList{}
			if err := env.Client.List(ctx, nodes); err != nil {
				t.Fatal(err)
			}
			cpu := resource.Quantity{}
			for _, n := range nodes.Items {
				cpu.Add(n.Status.Capacity[corev1.ResourceCPU])
			}
			events := &fakes.Recorder{}
			f.r.Limits, f.r.Recorder = tc.limit(len(nodes.Items), cpu), events
			f.reconcile()
			if n := len(f.nodes()); n != 1 {
				t.Fatalf("%d standby nodes launched, want 1 (the cluster's limit)", n)
			}
			f.reconcile()
			if n := len(f.nodes()); n != 1 {
				t.Fatalf("%d standby nodes after another reconcile, want still 1", n)
			}
			if !slices.ContainsFunc(events.For(h.Name), func(e fakes.Event) bool {
				return e.Reason == standby.ReasonCannotKeep && strings.Contains(e.Message, tc.why)
			}) {
				t.Errorf("events %+v, want %s naming %s", events.For(h.Name), standby.ReasonCannotKeep, tc.why)
			}
		})
	}
}

// TestStandbyNodesTheCacheDoesNotShowYetCountAgainstTheNodeCap: the
// reconciler's cache has not seen the standby node launched a moment
// ago (its Node lists leave it out); the next reconcile still counts it
// against --max-nodes-total and launches nothing past the cap. Before,
// the second reconcile launched a second node past it.
func TestStandbyNodesTheCacheDoesNotShowYetCountAgainstTheNodeCap(t *testing.T) {
	ctx := context.Background()
	f, h := setup(t, "standby-cap-lag", 4)
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	events := &fakes.Recorder{}
	f.r.Limits, f.r.Recorder = scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{Total: len(nodes.Items) + 1}}, events
	f.r.Client = interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if nl, ok := list.(*corev1.NodeList); ok {
				nl.Items = slices.DeleteFunc(nl.Items, func(n corev1.Node) bool { return n.Labels[v1alpha1.TaintStandby] == "true" })
			}
			return nil
		},
	})
	f.reconcile()
	if n := len(f.nodes()); n != 1 {
		t.Fatalf("%d standby nodes launched, want 1 (the cluster's cap)", n)
	}
	f.reconcile()
	if n := len(f.nodes()); n != 1 {
		t.Fatalf("%d standby nodes after another reconcile whose cache did not show the first, want still 1", n)
	}
	if !slices.ContainsFunc(events.For(h.Name), func(e fakes.Event) bool {
		return e.Reason == standby.ReasonCannotKeep && strings.Contains(e.Message, "--max-nodes-total")
	}) {
		t.Errorf("events %+v, want %s naming --max-nodes-total", events.For(h.Name), standby.ReasonCannotKeep)
	}
}
