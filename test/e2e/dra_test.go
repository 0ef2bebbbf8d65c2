package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// gpuGroup is a node group of two instance types whose nodes publish
// devices of driver: t4-4 (four t4s, cheaper) and a100-2 (two a100s).
func gpuGroup(name, driver string) *v1alpha1.NodeGroup {
	ng := b.NodeGroup(name,
		b.InstanceType("t4-4", "8", "32Gi", b.OnDemand("zone-a", "1.00")),
		b.Devices(driver, "gpu", 4, map[string]string{"model": "t4"}),
		b.InstanceType("a100-2", "8", "32Gi", b.OnDemand("zone-a", "3.00")),
		b.Devices(driver, "gpu", 2, map[string]string{"model": "a100"}),
		b.Size(0, 5), b.LaunchDelay(metav1.Duration{Duration: 2 * time.Second}))
	ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 2 * time.Second}
	return ng
}

func createObjects(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

func podsOf(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// TestGPUPodsScaleFromZeroWithDRA: three pods, each with a claim from a
// ResourceClaimTemplate for one a100, make berth launch a100 nodes (not the
// cheaper t4 ones) from zero; the real scheduler allocates the devices on
// the ResourceSlices the KWOK provider published and the pods run.
func TestGPUPodsScaleFromZeroWithDRA(t *testing.T) {
	ns := newNamespace(t)
	driver := ns + ".gpu.example.com"
	createObjects(t, b.DeviceClass(ns+"-gpu", driver))
	tmpl := b.ClaimTemplate("one-a100", b.DeviceRequest("gpu", ns+"-gpu", 1, fmt.Sprintf(`device.attributes[%q].model == "a100"`, driver)))
	tmpl.Namespace = ns
	createObjects(t, tmpl)
	createNodeGroup(t, gpuGroup("gpu-"+ns[len(ns)-8:], driver))
	group := "gpu-" + ns[len(ns)-8:]
	for i := range 3 {
		createPods(t, b.Pod(fmt.Sprintf("train-%d", i), b.Namespace(ns), b.NoUID(), b.CPU("1"),
			b.NodeSelector(v1alpha1.LabelNodeGroup, group), b.PodClaimTemplate("gpu", "one-a100")))
	}
	waitUnschedulable(t, ns, 3)
	start := time.Now()
	startController(t)
	waitRunning(t, ns, 3, 2*time.Minute)
	t.Logf("3 pods with device claims Running %.1fs after the controller started", time.Since(start).Seconds())

	nodes := groupNodes(t, group)
	for _, n := range nodes {
		if it := n.Labels[v1alpha1.LabelInstanceType]; it != "a100-2" {
			t.Errorf("node %s is a %s, want a100-2 (the t4s do not match the claims)", n.Name, it)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("%d nodes for three pods of one a100 each on two-a100 nodes, want 2", len(nodes))
	}
	claims := &resourcev1.ResourceClaimList{}
	if err := env.Client.List(context.Background(), claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{}
	for _, p := range podsOf(t, ns) {
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				nodeOf[*s.ResourceClaimName] = p.Spec.NodeName
			}
		}
	}
	if len(claims.Items) != 3 {
		t.Fatalf("%d claims, want 3 (one per pod)", len(claims.Items))
	}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
			t.Errorf("claim %s is not allocated: %+v", c.Name, c.Status)
			continue
		}
		if r := c.Status.Allocation.Devices.Results[0]; r.Driver != driver || r.Pool != nodeOf[c.Name] {
			t.Errorf("claim %s got %s/%s/%s, want a device of %s on its pod's node %s", c.Name, r.Driver, r.Pool, r.Device, driver, nodeOf[c.Name])
		}
	}
}

// TestPodGroupClaimIsHeldForTheGroup: a Workload's PodGroup lists a claim
// for two a100s; its three pods reference it. berth launches one a100 node,
// all pods run there and the claim is reserved for the PodGroup, not the
// pods. Deleting the pods one by one keeps the claim allocated (and the
// node: scale-down sees the live group's claim); deleting the PodGroup
// frees the claim, and berth removes the node.
func TestPodGroupClaimIsHeldForTheGroup(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	driver := ns + ".gpu.example.com"
	createObjects(t, b.DeviceClass(ns+"-gpu", driver))
	group := "gpu-" + ns[len(ns)-8:]
	createNodeGroup(t, gpuGroup(group, driver))
	claim := b.Claim("train-gpus", b.DeviceRequest("gpus", ns+"-gpu", 2, fmt.Sprintf(`device.attributes[%q].model == "a100"`, driver)))
	claim.Namespace, claim.UID = ns, ""
	workload := &schedulingv1alpha2.Workload{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: schedulingv1alpha2.WorkloadSpec{PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{
			Name: "workers", SchedulingPolicy: schedulingv1alpha2.PodGroupSchedulingPolicy{Basic: &schedulingv1alpha2.BasicSchedulingPolicy{}}}}}}
	pg := b.PodGroup("train", map[string]string{"gpus": "train-gpus"})
	pg.Namespace, pg.UID = ns, ""
	pg.Spec.PodGroupTemplateRef = &schedulingv1alpha2.PodGroupTemplateReference{Workload: &schedulingv1alpha2.WorkloadPodGroupTemplateReference{
		WorkloadName: "train", PodGroupTemplateName: "workers"}}
	createObjects(t, claim, workload, pg)
	for i := range 3 {
		createPods(t, b.Pod(fmt.Sprintf("worker-%d", i), b.Namespace(ns), b.NoUID(), b.CPU("1"),
			b.NodeSelector(v1alpha1.LabelNodeGroup, group), b.PodClaim("gpus", "train-gpus"), b.InPodGroup("train")))
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 3, 2*time.Minute)

	nodes := liveNodes(t, group)
	if len(nodes) != 1 || nodes[0].Labels[v1alpha1.LabelInstanceType] != "a100-2" {
		t.Fatalf("nodes %v, want one a100-2", shapes(nodes))
	}
	for _, p := range podsOf(t, ns) {
		if p.Spec.NodeName != nodes[0].Name {
			t.Errorf("pod %s on %s, want %s (the node with the group's devices)", p.Name, p.Spec.NodeName, nodes[0].Name)
		}
	}
	readClaim := func() *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train-gpus"}, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := readClaim()
	if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Resource != "podgroups" || c.Status.ReservedFor[0].Name != "train" {
		t.Fatalf("claim status %+v, want allocated and reserved for podgroups/train", c.Status)
	}

	for _, p := range podsOf(t, ns) {
		if err := env.Client.Delete(ctx, &p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(&p), &corev1.Pod{})
			return apierrors.IsNotFound(err), "pod " + p.Name + " still there", nil
		})
		if c := readClaim(); c.Status.Allocation == nil {
			t.Fatalf("claim deallocated after deleting pod %s; the PodGroup still exists", p.Name)
		}
	}
	// The group lives on without pods: its claim keeps the node.
	time.Sleep(5 * time.Second)
	if n := liveNodes(t, group); len(n) != 1 {
		t.Fatalf("%d nodes while the PodGroup's claim holds devices, want 1", len(n))
	}
	if c := readClaim(); c.Status.Allocation == nil {
		t.Fatal("claim deallocated while the PodGroup exists")
	}

	if err := env.Client.Delete(ctx, pg); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		c := readClaim()
		return c.Status.Allocation == nil && len(c.Status.ReservedFor) == 0, fmt.Sprintf("claim status %+v", c.Status), nil
	})
	expect.Eventually(t, 2*time.Minute, func(context.Context) (bool, string, error) {
		n := liveNodes(t, group)
		return len(n) == 0, fmt.Sprintf("%d nodes left", len(n)), nil
	})
}
