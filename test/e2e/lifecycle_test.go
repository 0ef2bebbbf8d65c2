package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// watchHealthy samples the web pods' healthy count (Ready, not deleting)
// until stop is called and returns the lowest seen.
func watchHealthy(ctx context.Context, ns string) (stop func() int32) {
	var mu sync.Mutex
	lowest := int32(1 << 30)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods := &corev1.PodList{}
			if env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"}) == nil {
				healthy := int32(0)
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && podReady(&p) {
						healthy++
					}
				}
				mu.Lock()
				lowest = min(lowest, healthy)
				mu.Unlock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() int32 {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return lowest
	}
}

// TestASpotInterruptionIsReplacedBeforeTheDeadline: a spot node runs 2 of
// 4 web pods (PDB minAvailable 3). It gets an interruption notice with two
// minutes left: berth launches a replacement first (not spot in that
// zone: the interrupted offering is avoided), the pods move without the
// PDB going below its minimum, and the node is gone before its deadline.
func TestASpotInterruptionIsReplacedBeforeTheDeadline(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ng := b.NodeGroup("spot-life", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.Spot("zone-a", "0.03"), b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever // only the notice moves pods
	createNodeGroup(t, ng)
	d := webDeployment(ns, "spot-life", 4)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	for _, o := range []client.Object{d, pdb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 4, 3*time.Minute)
	nodes := liveNodes(t, "spot-life")
	if len(nodes) != 2 || nodes[0].Labels[v1alpha1.LabelCapacityType] != "spot" {
		t.Fatalf("nodes %d (%s), want 2 spot nodes", len(nodes), nodes[0].Labels[v1alpha1.LabelCapacityType])
	}
	victim := nodes[0].Name
	lowest := watchHealthy(ctx, ns)
	deadline, err := kwok.New(env.Client, clock.RealClock{}).Interrupt(ctx, victim, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: victim}, &corev1.Node{})
		return client.IgnoreNotFound(err) == nil && err != nil, "node " + victim + " still there", client.IgnoreNotFound(err)
	})
	gone := time.Now()
	waitRunning(t, ns, 4, time.Minute)
	low := lowest()
	if gone.After(deadline) {
		t.Errorf("the interrupted node went at %s, after its deadline %s", gone.Format(time.RFC3339), deadline.Format(time.RFC3339))
	}
	if low < 3 {
		t.Errorf("healthy web pods dropped to %d, below the PDB's minAvailable 3", low)
	}
	for _, n := range liveNodes(t, "spot-life") {
		if n.Name != nodes[1].Name && n.Labels[v1alpha1.LabelCapacityType] == "spot" {
			t.Errorf("replacement %s is spot in the interrupted zone: the offering was not avoided", n.Name)
		}
	}
	t.Logf("interrupted %s removed %s before its deadline; lowest healthy pods %d (PDB 3)", victim, deadline.Sub(gone).Round(time.Second), low)
}

// TestADriftedGroupIsReplacedOneBudgetAtATime: a group's template label
// changes; its three nodes are replaced (budget 1 for Drifted), never more
// than one disrupted at a time, and the pods keep running.
func TestADriftedGroupIsReplacedOneBudgetAtATime(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	all := intstr.FromString("100%")
	ng := b.NodeGroup("drift-life", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.Budget = &all
	ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever
	ng.Spec.Disruption.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromInt32(1), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}}}
	createNodeGroup(t, ng)
	d := webDeployment(ns, "drift-life", 3)
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{b.AffinityTerm(v1alpha1.LabelHostname, "app", "web")}}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 3, 3*time.Minute)
	old := map[string]bool{}
	for _, n := range liveNodes(t, "drift-life") {
		old[n.Name] = true
	}
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"}
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	most := 0
	expect.Eventually(t, 6*time.Minute, func(ctx context.Context) (bool, string, error) {
		left, disrupted := 0, 0
		for _, n := range liveNodes(t, "drift-life") {
			if old[n.Name] {
				left++
				if n.Annotations[v1alpha1.AnnotationDisruptionReason] != "" {
					disrupted++
				}
			}
		}
		most = max(most, disrupted)
		return left == 0, fmt.Sprintf("%d drifted nodes left", left), nil
	})
	waitRunning(t, ns, 3, 2*time.Minute)
	if most > 1 {
		t.Errorf("%d drifted nodes were disrupted at once, want at most 1 (the budget)", most)
	}
	for _, n := range liveNodes(t, "drift-life") {
		if n.Labels["tier"] != "gold" {
			t.Errorf("node %s lacks the new label", n.Name)
		}
	}
}

// TestExpireAfterReplacesOldNodes: expireAfter 20 s: the node is replaced
// (its pod moves to a new node) and the new node carries on.
func TestExpireAfterReplacesOldNodes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ng := b.NodeGroup("expire-life", b.Size(0, 5), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever
	createNodeGroup(t, ng)
	if err := env.Client.Create(ctx, webDeployment(ns, "expire-life", 1)); err != nil {
		t.Fatal(err)
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 1, 3*time.Minute)
	first := liveNodes(t, "expire-life")[0].Name
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: 20 * time.Second}
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, n := range liveNodes(t, "expire-life") {
			if n.Name == first {
				return false, "the expired node is still there", nil
			}
		}
		return true, "", nil
	})
	waitRunning(t, ns, 1, time.Minute)
}

// TestRepairReplacesOneUnhealthyNodeNotAHalf: repair on, Ready False
// tolerated 10 s. One of five nodes goes NotReady (its fake kubelet
// stops): berth replaces it. Then half the group goes NotReady: berth
// repairs none of them.
func TestRepairReplacesOneUnhealthyNodeNotAHalf(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ng := b.NodeGroup("repair-life", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever
	ng.Spec.Disruption.Repair = &v1alpha1.Repair{Conditions: []v1alpha1.RepairCondition{
		{Type: "Ready", Status: "False", Toleration: metav1.Duration{Duration: 10 * time.Second}}}}
	createNodeGroup(t, ng)
	d := webDeployment(ns, "repair-life", 5)
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{b.AffinityTerm(v1alpha1.LabelHostname, "app", "web")}}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 5, 3*time.Minute)
	nodes := liveNodes(t, "repair-life")
	breakNode := func(name string) {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(n.DeepCopy())
		delete(n.Annotations, v1alpha1.AnnotationKWOKNode) // its fake kubelet stops
		if err := env.Client.Patch(ctx, n, patch); err != nil {
			t.Fatal(err)
		}
		patch = client.MergeFrom(n.DeepCopy())
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionFalse, "KubeletDown"
				n.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		if err := env.Client.Status().Patch(ctx, n, patch); err != nil {
			t.Fatal(err)
		}
	}
	breakNode(nodes[0].Name)
	expect.Eventually(t, 3*time.Minute, func(context.Context) (bool, string, error) {
		for _, n := range liveNodes(t, "repair-life") {
			if n.Name == nodes[0].Name {
				return false, "the unhealthy node is still there", nil
			}
		}
		return true, "", nil
	})
	waitRunning(t, ns, 5, 2*time.Minute)
	now := liveNodes(t, "repair-life")
	for _, n := range now[:3] {
		breakNode(n.Name)
	}
	poll(40*time.Second, func() bool { return false })
	if got := len(liveNodes(t, "repair-life")); got != len(now) {
		t.Errorf("%d nodes after half the group went NotReady, want all %d kept (a partition is not a repair)", got, len(now))
	}
}
