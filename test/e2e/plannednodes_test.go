package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestAntiAffinityOnCapacityTypeGetsOneNodeOfEach: a group offers spot
// and on-demand in each zone; a Deployment of two small replicas requires
// its pods on different capacity types (required pod anti-affinity with
// topology key berth.dev/capacity-type). Both would fit one node, and a
// planned node that has not chosen its capacity type yet must still keep
// them apart: berth launches exactly two nodes, one spot and one
// on-demand, both pods run on them, and no second scale-up follows.
func TestAntiAffinityOnCapacityTypeGetsOneNodeOfEach(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("capacity-mix", b.InstanceType("m-2", "2", "4Gi",
		b.Spot("zone-a", "0.030"), b.OnDemand("zone-a", "0.090"), b.Spot("zone-b", "0.032"), b.OnDemand("zone-b", "0.088"))))
	ctrl := startController(t)

	labels := map[string]string{"app": "apart"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "apart", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: "capacity-mix"},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{b.AffinityTerm(v1alpha1.LabelCapacityType, "app", "apart")},
			}},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
		}},
	}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, 2, 2*time.Minute)

	nodes := groupNodes(t, "capacity-mix")
	var types []string
	for _, n := range nodes {
		types = append(types, n.Labels[v1alpha1.LabelCapacityType])
	}
	slices.Sort(types)
	if want := []string{"on-demand", "spot"}; !slices.Equal(types, want) {
		t.Errorf("nodes of capacity types %v, want one on-demand and one spot (%v)", types, shapes(nodes))
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	on := map[string]string{}
	for _, n := range nodes {
		on[n.Name] = n.Labels[v1alpha1.LabelCapacityType]
	}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		ct, ok := on[p.Spec.NodeName]
		if !ok {
			t.Errorf("pod %s runs on %q, not on a node of the group", p.Name, p.Spec.NodeName)
		}
		seen[ct] = true
	}
	if len(seen) != 2 {
		t.Errorf("pods on capacity types %v, want one pod on each", seen)
	}
	// No second scale-up: the controller launched the two nodes and no
	// other, in the round that planned them or later.
	launched := 0.0
	for _, m := range ctrl.metricFamilies(t)["berth_provisioning_node_launches_total"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["nodegroup"] == "capacity-mix" && l["result"] == "launched" {
			launched += m.GetCounter().GetValue()
		}
	}
	if launched != 2 || len(nodes) != 2 {
		t.Errorf("%v launches and %d nodes, want 2 of each: %s", launched, len(nodes), fmt.Sprint(shapes(nodes)))
	}
}

// TestPodsSpreadOverZoneAndCapacityTypeAllRun: a Deployment of 13
// replicas of 300m with a zone and a capacity-type DoNotSchedule spread
// (skew 1), in a group whose zone-c offers on-demand only. Packed
// greedily, counts such as zones 2/2/1 with 3 on-demand and 2 spot leave
// the next pod nowhere (it must go to zone-c and be spot): berth planned
// 5 of 13 pods, and kube-scheduler could place no more. Every replica
// must run, within both skews, on the real scheduler.
func TestPodsSpreadOverZoneAndCapacityTypeAllRun(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("two-spreads", b.InstanceType("m-1", "1", "4Gi",
		b.Spot("zone-a", "0.030"), b.Spot("zone-b", "0.030"),
		b.OnDemand("zone-a", "0.100"), b.OnDemand("zone-b", "0.100"), b.OnDemand("zone-c", "0.100"))))
	startController(t)

	labels := map[string]string{"app": "spread"}
	spread := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](13), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector:              map[string]string{v1alpha1.LabelNodeGroup: "two-spreads"},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{spread(v1alpha1.LabelZone), spread(v1alpha1.LabelCapacityType)},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		}},
	}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, 13, 3*time.Minute)

	nodes := groupNodes(t, "two-spreads")
	of := map[string]corev1.Node{}
	for _, n := range nodes {
		of[n.Name] = n
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	zones, cts := map[string]int{}, map[string]int{}
	for _, p := range pods.Items {
		zones[of[p.Spec.NodeName].Labels[v1alpha1.LabelZone]]++
		cts[of[p.Spec.NodeName].Labels[v1alpha1.LabelCapacityType]]++
	}
	skew := func(counts map[string]int, domains ...string) int {
		lo, hi := counts[domains[0]], counts[domains[0]]
		for _, d := range domains {
			lo, hi = min(lo, counts[d]), max(hi, counts[d])
		}
		return hi - lo
	}
	if skew(zones, "zone-a", "zone-b", "zone-c") > 1 || skew(cts, "spot", "on-demand") > 1 {
		t.Errorf("pods by zone %v and by capacity type %v: a skew above 1 (nodes %v)", zones, cts, shapes(nodes))
	}
	t.Logf("pods by zone %v, by capacity type %v, on %d nodes %v", zones, cts, len(nodes), shapes(nodes))
}
