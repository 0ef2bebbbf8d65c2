package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

const bootDelay = 20 * time.Second

func unitsOf(n int32) *v1alpha1.HeadroomUnits {
	return &v1alpha1.HeadroomUnits{Count: n, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
}

func createHeadroom(t *testing.T, h *v1alpha1.Headroom) {
	t.Helper()
	if err := env.Client.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), h) })
}

func waitHeadroom(t *testing.T, name string, timeout time.Duration, ok func(v1alpha1.HeadroomStatus) bool) v1alpha1.HeadroomStatus {
	t.Helper()
	var st v1alpha1.HeadroomStatus
	expect.Eventually(t, timeout, func(ctx context.Context) (bool, string, error) {
		h := &v1alpha1.Headroom{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, h); err != nil {
			return false, "", err
		}
		st = h.Status
		return ok(st), fmt.Sprintf("headroom %s: %d/%d ready", name, st.ReadyUnits, st.DesiredUnits), nil
	})
	return st
}

func allReady(want int32) func(v1alpha1.HeadroomStatus) bool {
	return func(s v1alpha1.HeadroomStatus) bool { return s.DesiredUnits == want && s.ReadyUnits == want }
}

func deployment(ns, name string, replicas int32, opts ...b.PodOption) *appsv1.Deployment {
	tmpl := b.Pod(name, append([]b.PodOption{b.Labels("app", name)}, opts...)...)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: tmpl.Spec},
		},
	}
}

func nodeNames(nodes []corev1.Node) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		out[n.Name] = true
	}
	return out
}

// burstRunsOnExistingNodes creates a Deployment of n pods of 1 cpu / 1 Gi
// and checks that they all run on nodes that existed before it. With
// virtual headroom each pod started no later than any node launched after
// the burst. With placeholders berth launches replacements as soon as the
// placeholders are preempted, during the burst, so there each pod must have
// started before any new node was Ready: no pod waited for a node to boot.
func burstRunsOnExistingNodes(t *testing.T, ns, group string, n int32, placeholders bool) {
	t.Helper()
	before := nodeNames(groupNodes(t, group))
	if err := env.Client.Create(context.Background(), deployment(ns, "burst", n, b.CPU("1"), b.Memory("1Gi"),
		b.NodeSelector(v1alpha1.LabelNodeGroup, group))); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	defer func() {
		if t.Failed() {
			if len(pods.Items) == 0 {
				_ = env.Client.List(context.Background(), pods, client.InNamespace(ns))
			}
			for _, p := range pods.Items {
				t.Logf("burst pod %s phase=%s node=%q nominated=%q events=%q", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.NominatedNodeName, events(t, ns, p.Name))
			}
			others := &corev1.PodList{}
			_ = env.Client.List(context.Background(), others, client.InNamespace(v1alpha1.SystemNamespace))
			for _, p := range others.Items {
				t.Logf("berth pod %s phase=%s node=%q nominated=%q deleting=%v events=%q", p.Name, p.Status.Phase, p.Spec.NodeName,
					p.Status.NominatedNodeName, p.DeletionTimestamp != nil, events(t, v1alpha1.SystemNamespace, p.Name))
			}
		}
	}()
	waitRunning(t, ns, int(n), bootDelay+20*time.Second)
	if err := env.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !before[p.Spec.NodeName] {
			t.Errorf("pod %s runs on %s, a node launched after the burst", p.Name, p.Spec.NodeName)
		}
		for _, node := range groupNodes(t, group) {
			if before[node.Name] || p.Status.StartTime == nil {
				continue
			}
			limit, what := node.CreationTimestamp.Time, "launched"
			if placeholders {
				readyAt, err := time.Parse(time.RFC3339Nano, node.Annotations[v1alpha1.AnnotationReadyAt])
				if err != nil {
					t.Fatal(err)
				}
				limit, what = readyAt, "Ready"
			}
			if p.Status.StartTime.After(limit) {
				t.Errorf("pod %s started at %v, after node %s was %s at %v", p.Name, p.Status.StartTime, node.Name, what, limit)
			}
		}
	}
}

// TestHeadroomAbsorbsABurstThenIsRestored: 4 units of 1 cpu / 1 Gi in a
// node group; nodes are launched until they fit; a burst of 4 such pods
// runs at once without a new node; then berth launches nodes until the
// headroom is back to 4/4.
func TestHeadroomAbsorbsABurstThenIsRestored(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("hr-virtual", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: bootDelay})))
	startController(t)
	createHeadroom(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "hr-virtual"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"hr-virtual"}}, Units: unitsOf(4)}})
	waitHeadroom(t, "hr-virtual", 2*time.Minute, allReady(4))
	if n := len(groupNodes(t, "hr-virtual")); n != 2 {
		t.Errorf("%d nodes for 4 units of 1 cpu on 2-cpu nodes, want 2", n)
	}
	burstRunsOnExistingNodes(t, ns, "hr-virtual", 4, false)
	waitHeadroom(t, "hr-virtual", time.Minute, func(s v1alpha1.HeadroomStatus) bool { return s.ReadyUnits < 4 })
	waitHeadroom(t, "hr-virtual", 2*time.Minute, allReady(4))
	if n := len(groupNodes(t, "hr-virtual")); n != 4 {
		t.Errorf("%d nodes after restoring the headroom, want 4", n)
	}
	ev := events(t, "", "hr-virtual")
	if !containsPrefix(ev, "HeadroomConsumed: ") || !containsPrefix(ev, "HeadroomRestored: ") {
		t.Errorf("events on the headroom: %q", ev)
	}
}

func containsPrefix(xs []string, prefix string) bool {
	for _, x := range xs {
		if len(x) >= len(prefix) && x[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

// TestPlaceholdersArePreemptedAndRestored: the same with placeholder pods:
// the burst preempts them, they go pending, and their scale-up restores
// the headroom.
func TestPlaceholdersArePreemptedAndRestored(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("hr-placeholders", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: bootDelay})))
	startController(t)
	createHeadroom(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "hr-placeholders"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"hr-placeholders"}}, Units: unitsOf(4), Placeholders: true}})
	waitHeadroom(t, "hr-placeholders", 2*time.Minute, allReady(4))
	if n := len(groupNodes(t, "hr-placeholders")); n != 2 {
		t.Errorf("%d nodes for 4 placeholders of 1 cpu on 2-cpu nodes, want 2", n)
	}
	first := placeholderUIDs(t, "hr-placeholders")
	burstRunsOnExistingNodes(t, ns, "hr-placeholders", 4, true)
	waitHeadroom(t, "hr-placeholders", time.Minute, func(s v1alpha1.HeadroomStatus) bool { return s.ReadyUnits < 4 })
	waitHeadroom(t, "hr-placeholders", 2*time.Minute, allReady(4))
	now := placeholderUIDs(t, "hr-placeholders")
	for uid := range now {
		if first[uid] {
			t.Errorf("placeholder %s survived the burst; the burst had to preempt all four", uid)
		}
	}
	if n := len(groupNodes(t, "hr-placeholders")); n != 4 {
		t.Errorf("%d nodes after the placeholders came back, want 4", n)
	}
}

func placeholderUIDs(t *testing.T, headroom string) map[string]bool {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(v1alpha1.SystemNamespace),
		client.MatchingLabels{v1alpha1.LabelHeadroom: headroom}); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			out[string(p.UID)] = true
		}
	}
	return out
}

// TestPerNodeReserveOnlyForBurstCritical: a node full but for its reserve
// (500m / 512Mi): an ordinary pod that needs the slice stays pending and
// triggers a new node; a berth-burst-critical pod preempts the reserve and
// runs at once.
func TestPerNodeReserveOnlyForBurstCritical(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("hr-reserve", b.Size(1, 3), b.InstanceType("r-2", "2", "4Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: bootDelay})))
	startController(t)
	createHeadroom(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "hr-reserve"}, Spec: v1alpha1.HeadroomSpec{
		PerNode: &v1alpha1.PerNodeReserve{NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: "hr-reserve"},
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}})
	// The min-size node boots and the DaemonSet controller starts its
	// reserve pod: on a loaded machine (the whole e2e suite beside other
	// packages) this once took over two minutes.
	waitHeadroom(t, "hr-reserve", 4*time.Minute, func(s v1alpha1.HeadroomStatus) bool { return s.ReservedNodes == 1 })
	first := groupNodes(t, "hr-reserve")[0].Name
	sel := b.NodeSelector(v1alpha1.LabelNodeGroup, "hr-reserve")
	createPods(t, b.Pod("filler", b.Namespace(ns), b.NoUID(), b.CPU("1500m"), sel))
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		return podRunningOn(ctx, client.ObjectKey{Namespace: ns, Name: "filler"})
	})

	createPods(t, b.Pod("ordinary", b.Namespace(ns), b.NoUID(), b.CPU("500m"), sel))
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		n := len(groupNodes(t, "hr-reserve"))
		return n == 2, fmt.Sprintf("%d nodes; want a second one for the ordinary pod", n), nil
	})
	start := time.Now()
	burst := b.Pod("burst", b.Namespace(ns), b.NoUID(), b.CPU("500m"), sel)
	burst.Spec.PriorityClassName = v1alpha1.PriorityClassBurstCritical
	createPods(t, burst)
	expect.Eventually(t, bootDelay-5*time.Second, func(ctx context.Context) (bool, string, error) {
		return podRunningOn(ctx, client.ObjectKey{Namespace: ns, Name: "burst"})
	})
	got := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "burst"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != first {
		t.Errorf("burst-critical pod runs on %s, want the full node %s (preempting its reserve)", got.Spec.NodeName, first)
	}
	t.Logf("burst-critical pod ran %s after creation", time.Since(start).Round(100*time.Millisecond))
	ordinary := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ordinary"}, ordinary); err != nil {
		t.Fatal(err)
	}
	if ordinary.Spec.NodeName == first {
		t.Errorf("the ordinary pod took the reserved slice of %s", first)
	}
	filler := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "filler"}, filler); err != nil ||
		filler.DeletionTimestamp != nil || filler.Spec.NodeName != first {
		t.Errorf("the workload pod on %s was disturbed (err %v): the reserve, not the workload, must make room", first, err)
	}
	if ev := events(t, ns, "burst"); !containsPrefix(ev, "UsingNodeReserve: Taking the per-node reserve slice of node "+first) {
		t.Errorf("events on the burst-critical pod: %q", ev)
	}
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		return podRunningOn(ctx, client.ObjectKey{Namespace: ns, Name: "ordinary"})
	})
}

// TestAReserveChangeKeepsTheSliceOfAFullNode: a node full but for its
// reserve (500m); the reserve grows to 600m, which the node has no room
// for. The new reserve pod waits beside the old one, which keeps the
// slice: deleted first (the DaemonSet's default rolling update), the node
// had no reserve at all, and the new pod never preempts to get one.
func TestAReserveChangeKeepsTheSliceOfAFullNode(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("hr-roll", b.Size(1, 1), b.InstanceType("r-2", "2", "4Gi", b.OnDemand("zone-a", "0.10"))))
	startController(t)
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "hr-roll"}, Spec: v1alpha1.HeadroomSpec{
		PerNode: &v1alpha1.PerNodeReserve{NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: "hr-roll"},
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}
	createHeadroom(t, h)
	waitHeadroom(t, "hr-roll", 4*time.Minute, func(s v1alpha1.HeadroomStatus) bool { return s.ReservedNodes == 1 })
	createPods(t, b.Pod("filler", b.Namespace(ns), b.NoUID(), b.CPU("1500m"), b.NodeSelector(v1alpha1.LabelNodeGroup, "hr-roll")))
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		return podRunningOn(ctx, client.ObjectKey{Namespace: ns, Name: "filler"})
	})
	old := placeholderUIDs(t, "hr-roll") // the running pods of the headroom: its reserve pod
	if len(old) != 1 {
		t.Fatalf("%d reserve pods running, want 1", len(old))
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "hr-roll"}, h); err != nil {
		t.Fatal(err)
	}
	h.Spec.PerNode.Resources[corev1.ResourceCPU] = resource.MustParse("600m")
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	// The new reserve pod comes, and cannot run: the old one stays.
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroom: "hr-roll"}); err != nil {
			return false, "", err
		}
		oldRunning, pending := false, 0
		for _, p := range pods.Items {
			oldRunning = oldRunning || old[string(p.UID)] && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
			if !old[string(p.UID)] && p.Status.Phase == corev1.PodPending {
				pending++
			}
		}
		return oldRunning && pending == 1, fmt.Sprintf("old reserve pod running %v, new pending %d", oldRunning, pending), nil
	})
	time.Sleep(10 * time.Second)
	if still := placeholderUIDs(t, "hr-roll"); len(still) != 1 || !old[firstKey(still)] {
		t.Errorf("reserve pods running %v, want the old one still holding the slice", still)
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// TestAutomaticHeadroomFollowsTheWorkload: 20% of the workload in scope;
// scaling the workload up grows the desired units.
func TestAutomaticHeadroomFollowsTheWorkload(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("hr-auto", b.Size(0, 20), b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"))))
	startController(t)
	web := deployment(ns, "web", 5, b.CPU("1"), b.Memory("1Gi"), b.NodeSelector(v1alpha1.LabelNodeGroup, "hr-auto"))
	if err := env.Client.Create(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	createHeadroom(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "hr-auto"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"hr-auto"}}, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 20}}})
	st := waitHeadroom(t, "hr-auto", 90*time.Second, allReady(1)) // 20% of 5 cpu = 1 unit of the 1-cpu shape
	if cpu := st.Unit.Resources[corev1.ResourceCPU]; cpu.String() != "1" {
		t.Errorf("unit shape %v, want the workload's 1 cpu", st.Unit.Resources)
	}
	scale := client.MergeFrom(web.DeepCopy())
	web.Spec.Replicas = new(int32(15))
	if err := env.Client.Patch(context.Background(), web, scale); err != nil {
		t.Fatal(err)
	}
	waitHeadroom(t, "hr-auto", 90*time.Second, allReady(3)) // 20% of 15 cpu
}

// TestCapacityBufferFromADeployment: a CapacityBuffer of 50% of a
// Deployment of 4 gets 2 chunks of the Deployment's pod shape, its status
// and conditions, and capacity for them.
func TestCapacityBufferFromADeployment(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("hr-buffer", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	startController(t)
	sel := b.NodeSelector(v1alpha1.LabelNodeGroup, "hr-buffer")
	if err := env.Client.Create(context.Background(), deployment(ns, "web", 4, b.CPU("1"), b.Memory("1Gi"), sel)); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, 4, 90*time.Second)
	if n := len(groupNodes(t, "hr-buffer")); n != 2 {
		t.Fatalf("%d nodes for the workload, want 2", n)
	}
	pct := int32(50)
	cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "web-buffer", Namespace: ns},
		Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: &pct}}
	if err := env.Client.Create(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &cbv1beta1.CapacityBuffer{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cb), got); err != nil {
			return false, "", err
		}
		s := got.Status
		ok := s.Replicas != nil && *s.Replicas == 2 && s.PodTemplateRef != nil &&
			meta.IsStatusConditionTrue(s.Conditions, cbv1beta1.ConditionReadyForProvisioning) &&
			meta.IsStatusConditionTrue(s.Conditions, cbv1beta1.ConditionProvisioning) &&
			meta.FindStatusCondition(s.Conditions, cbv1beta1.ConditionProvisioning).Message == "berth keeps 2 chunks; 2 fit in free capacity now"
		return ok, fmt.Sprintf("status %+v", s), nil
	})
	if n := len(groupNodes(t, "hr-buffer")); n != 3 {
		t.Errorf("%d nodes with the buffer, want 3 (one more for 2 chunks of 1 cpu)", n)
	}
}
