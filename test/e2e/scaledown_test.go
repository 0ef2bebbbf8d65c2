package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// webDeployment is a Deployment of 900m-cpu pods on a node group: two fit
// a 2-cpu node.
func webDeployment(ns, group string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: group},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}}}},
		}},
	}}
}

// liveNodes are the group's nodes not being deleted.
func liveNodes(t *testing.T, group string) []corev1.Node {
	var out []corev1.Node
	for _, n := range groupNodes(t, group) {
		if n.DeletionTimestamp == nil {
			out = append(out, n)
		}
	}
	return out
}

// TestScaleDownAfterTheWorkloadShrinks: a Deployment of 12 pods (6 nodes)
// with a PDB (minAvailable 2) and a Headroom of one 1500m unit (a node of
// its own) is scaled to 3. berth removes nodes one at a time (default
// budget) until 2 nodes hold the 3 pods and 1 holds the unit. The
// controller is killed (-9) in the middle of a drain and restarted: the
// drain finishes. A watcher samples the PDB and the Headroom the whole
// time: healthy pods never drop below 2 and ready units never below 1.
func TestScaleDownAfterTheWorkloadShrinks(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	after := metav1.Duration{Duration: 3 * time.Second}
	ng := b.NodeGroup("shrink", b.Size(0, 20), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidateAfter = &after
	createNodeGroup(t, ng)
	hr := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "shrink-spare"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"shrink"}},
		Units: &v1alpha1.HeadroomUnits{Count: 1, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	d := webDeployment(ns, "shrink", 12)
	for _, o := range []client.Object{hr, pdb, d} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), hr) })
	args := []string{"--scale-down-interval=1s"}
	ctrl := startController(t, args...)
	waitRunning(t, ns, 12, 3*time.Minute)
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		got := &v1alpha1.Headroom{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(hr), got)
		return err == nil && got.Status.ReadyUnits == 1, fmt.Sprintf("headroom %d/1 ready", got.Status.ReadyUnits), err
	})
	before := len(liveNodes(t, "shrink"))

	// Watch the budget and the headroom while berth scales down.
	var mu sync.Mutex
	minHealthy, minReady := int32(1<<30), int32(1<<30)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for watchCtx.Err() == nil {
			// Healthy pods counted as the PDB counts them: Ready and not
			// being deleted (the PDB's status may lag or be unset).
			pods, h := &corev1.PodList{}, &v1alpha1.Headroom{}
			if env.Client.List(watchCtx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"}) == nil &&
				env.Client.Get(watchCtx, client.ObjectKeyFromObject(hr), h) == nil {
				healthy := int32(0)
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && podReady(&p) {
						healthy++
					}
				}
				mu.Lock()
				minHealthy, minReady = min(minHealthy, healthy), min(minReady, h.Status.ReadyUnits)
				mu.Unlock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	if err := env.Client.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`))); err != nil {
		t.Fatal(err)
	}
	// Kill the controller as soon as a drain is under way, and restart it.
	expect.Eventually(t, 2*time.Minute, func(context.Context) (bool, string, error) {
		for _, n := range liveNodes(t, "shrink") {
			for _, taint := range n.Spec.Taints {
				if taint.Key == v1alpha1.TaintDisrupted {
					return true, "", nil
				}
			}
		}
		return false, "no node is being drained yet", nil
	})
	ctrl.kill()
	startController(t, args...)

	expect.Eventually(t, 4*time.Minute, func(context.Context) (bool, string, error) {
		n := len(liveNodes(t, "shrink"))
		return n == 3, fmt.Sprintf("%d nodes, want 3 (2 for the 3 pods, 1 for the headroom unit)", n), nil
	})
	waitRunning(t, ns, 3, time.Minute)
	stopWatch()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("scaled down from %d to 3 nodes; lowest healthy pods seen %d (PDB minAvailable 2), lowest ready headroom units %d (desired 1)", before, minHealthy, minReady)
	if minHealthy < 2 {
		t.Errorf("healthy pods dropped to %d, below the PDB's minAvailable 2", minHealthy)
	}
	if minReady < 1 {
		t.Errorf("ready headroom units dropped to %d during the scale-down, want never below 1", minReady)
	}
	for _, n := range liveNodes(t, "shrink") {
		for _, taint := range n.Spec.Taints {
			if taint.Key == v1alpha1.TaintDisrupted {
				t.Errorf("node %s is left tainted", n.Name)
			}
		}
	}
}

// TestBlockersKeepTheirNodes: three pods, one per node (anti-affinity),
// each of which forbids its node's removal: a bare pod, a pod annotated
// berth.dev/do-not-disrupt and a pod with Ocean's restrict-scale-down
// label. No node goes, and each node's ScaleDownBlocked event names the
// pod and the rule.
func TestBlockersKeepTheirNodes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	after := metav1.Duration{Duration: time.Second}
	ng := b.NodeGroup("blockers", b.Size(0, 5), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidateAfter = &after
	createNodeGroup(t, ng)
	spreadOut := b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "role", "blocker"))
	want := map[string]string{}
	for name, opt := range map[string]b.PodOption{
		"bare":       func(*corev1.Pod) {},
		"no-disrupt": b.Annotation(v1alpha1.AnnotationDoNotDisrupt, "true"),
		"ocean":      b.Labels("spotinst.io/restrict-scale-down", "true"),
	} {
		p := b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.Labels("role", "blocker"), spreadOut,
			b.NodeSelector(v1alpha1.LabelNodeGroup, "blockers"), opt)
		if name != "bare" {
			// Backed by a controller, so that only the annotation or label blocks.
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"blocker": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"blocker": name, "role": "blocker"},
					Annotations: p.Annotations}, Spec: p.Spec}}}
			for k, v := range p.Labels {
				rs.Spec.Template.Labels[k] = v
			}
			if err := env.Client.Create(ctx, rs); err != nil {
				t.Fatal(err)
			}
		} else if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		want[name] = map[string]string{"bare": "NotReplicated", "no-disrupt": "DoNotDisrupt", "ocean": "DoNotDisrupt"}[name]
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 3, 2*time.Minute)
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		key := p.Name
		if r := p.Labels["blocker"]; r != "" {
			key = r
		}
		rule := want[key]
		expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
			for _, e := range events(t, "default", p.Spec.NodeName) {
				if strings.HasPrefix(e, "ScaleDownBlocked") && strings.Contains(e, p.Name) && strings.Contains(e, "("+rule+")") {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("no ScaleDownBlocked event naming %s and %s on node %s: %v", p.Name, rule, p.Spec.NodeName, events(t, "default", p.Spec.NodeName)), nil
		})
	}
	if n := len(liveNodes(t, "blockers")); n != 3 {
		t.Errorf("%d nodes, want the 3 that blockers hold", n)
	}
}

// TestThreeNodesBecomeOneCheaperNode: three 2-cpu nodes at 0.10/h hold one
// 1200m pod each. When the group starts offering an 8-cpu node at 0.20/h,
// berth launches one, and only after it is Ready taints the old nodes
// (their disruption-started time is not before its Ready time); the pods
// end up on it and the old nodes are gone.
func TestThreeNodesBecomeOneCheaperNode(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	after := metav1.Duration{Duration: 2 * time.Second}
	all := intstr.FromString("100%")
	ng := b.NodeGroup("consolidate", b.Size(0, 10), b.InstanceType("small-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: 3 * time.Second}))
	ng.Spec.Disruption.ConsolidateAfter, ng.Spec.Disruption.Budget = &after, &all
	createNodeGroup(t, ng)
	d := webDeployment(ns, "consolidate", 3)
	d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1200m")
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 3, 2*time.Minute)
	old := map[string]bool{}
	for _, n := range liveNodes(t, "consolidate") {
		old[n.Name] = true
	}
	if len(old) != 3 {
		t.Fatalf("%d nodes for three 1200m pods on 2-cpu nodes, want 3", len(old))
	}
	got := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got); err != nil {
		t.Fatal(err)
	}
	b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(got)
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	var large corev1.Node
	expect.Eventually(t, 3*time.Minute, func(context.Context) (bool, string, error) {
		nodes := liveNodes(t, "consolidate")
		for _, n := range nodes {
			if old[n.Name] {
				return false, fmt.Sprintf("%d nodes, old ones still there", len(nodes)), nil
			}
			large = n
		}
		return len(nodes) == 1, fmt.Sprintf("%d nodes", len(nodes)), nil
	})
	if large.Labels[v1alpha1.LabelInstanceType] != "large-8" {
		t.Errorf("the node left is %s (%s), want the large-8 replacement", large.Name, large.Labels[v1alpha1.LabelInstanceType])
	}
	waitRunning(t, ns, 3, time.Minute)
	var readyAt time.Time
	for _, c := range large.Status.Conditions {
		if c.Type == corev1.NodeReady {
			readyAt = c.LastTransitionTime.Time
		}
	}
	for name := range old {
		replacing := 0
		for _, e := range events(t, "default", name) {
			if strings.HasPrefix(e, "Replacing") {
				replacing++
				if !strings.Contains(e, "by new node "+large.Name) {
					t.Errorf("node %s: %q, want it replaced by %s", name, e, large.Name)
				}
			}
		}
		if replacing != 1 {
			t.Errorf("node %s got %d Replacing events, want exactly one replacement", name, replacing)
		}
	}
	t.Logf("replacement %s Ready at %s", large.Name, readyAt.Format(time.RFC3339))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
