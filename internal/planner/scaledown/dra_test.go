package scaledown_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestWorkloadClaimKeepsItsNode: an empty node whose devices hold a claim
// reserved for a PodGroup stays while the group exists (its pods may come
// back and expect the devices there), and goes once the group is gone.
func TestWorkloadClaimKeepsItsNode(t *testing.T) {
	g := group("g")
	claim := b.AllocatedOn(b.Claim("train-gpus", b.DeviceRequest("g", "gpu", 1)), "gpu.example.com", "gpu-1", 0, "gpu-0")
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{
		APIGroup: schedulingv1alpha2.GroupName, Resource: "podgroups", Name: "train", UID: "uid-podgroup-train"}}
	pg := b.PodGroup("train", map[string]string{"gpus": "train-gpus"})
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("gpu-1", g), node("plain-1", g)},
		DRA: snapshot.DRA{Claims: []*resourcev1.ResourceClaim{claim}, PodGroups: []*schedulingv1alpha2.PodGroup{pg}}}
	got := run(t, in)
	want := outcome{removed: []string{"plain-1"}, blocked: map[string]string{"gpu-1": string(scaledown.ReasonWorkloadClaim)}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("while the PodGroup lives (-want +got):\n%s", diff)
	}
	in.DRA.PodGroups = nil
	got = run(t, in)
	want = outcome{removed: []string{"gpu-1", "plain-1"}, blocked: map[string]string{}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("after the PodGroup is gone (-want +got):\n%s", diff)
	}
}

// TestPodsWithTemplateClaimsMove: a pod whose claim was made from a
// template moves as its controller recreates it, with a new claim from the
// template: its node can go when another node has free devices, not when
// none has.
func TestPodsWithTemplateClaimsMove(t *testing.T) {
	g := group("g")
	owned := b.AllocatedOn(b.Claim("train-0-gpu", b.DeviceRequest("g", "gpu", 1)), "gpu.example.com", "gpu-1", 1, "gpu-0")
	pod := app("train-0", "gpu-1", "1", b.PodClaimTemplate("gpu", "one-gpu"))
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("train-0-gpu")}}
	dra := func(freeOnOther int) snapshot.DRA {
		return snapshot.DRA{
			DeviceClasses:  []*resourcev1.DeviceClass{b.DeviceClass("gpu", "gpu.example.com")},
			ClaimTemplates: []*resourcev1.ResourceClaimTemplate{b.ClaimTemplate("one-gpu", b.DeviceRequest("g", "gpu", 1))},
			Claims:         []*resourcev1.ResourceClaim{owned},
			Slices: []*resourcev1.ResourceSlice{b.Slice("gpu-1", "gpu.example.com", "gpu", 1, nil),
				b.Slice("gpu-2", "gpu.example.com", "gpu", freeOnOther, nil)},
		}
	}
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Pods: []*corev1.Pod{pod, app("keep", "gpu-2", "1")},
		Nodes: []*corev1.Node{node("gpu-1", g), node("gpu-2", g)}, DRA: dra(1)}
	if got := run(t, in); !slices.Contains(got.removed, "gpu-1") {
		t.Errorf("gpu-1 stays (%v) although gpu-2 has a free gpu for its pod", got.blocked)
	}
	in.DRA = dra(0)
	if got := run(t, in); slices.Contains(got.removed, "gpu-1") || got.blocked["gpu-1"] != "NoHome default/train-0" {
		t.Errorf("gpu-1: removed %v, blocked %q; want it kept (NoHome default/train-0): no other node has a gpu", got.removed, got.blocked["gpu-1"])
	}
}

// TestANodeWhoseDriverNeverPublishedIsNoHomeForDevicePods: gpu-2, of a
// type with a GPU, has been up for months and its DRA driver never
// published a ResourceSlice: kube-scheduler sees no device there. The GPU
// pod of gpu-1 has no home, and gpu-1 stays (it was moved onto gpu-2's
// GPU of the type, and gpu-1 removed).
func TestANodeWhoseDriverNeverPublishedIsNoHomeForDevicePods(t *testing.T) {
	const drv = "gpu.example.com"
	g := group("g", b.InstanceType("g-1", "4", "16Gi", b.OnDemand("zone-a", "1.10")), b.Devices(drv, "gpu", 1, nil))
	withType := func(n *corev1.Node) *corev1.Node {
		it, off := g.FindOffering("g-1", "zone-a", v1alpha1.CapacityTypeOnDemand)
		for k, v := range g.NodeLabels(it, off) {
			n.Labels[k] = v
		}
		return n
	}
	owned := b.AllocatedOn(b.Claim("train-0-gpu", b.DeviceRequest("g", "gpu", 1)), drv, "gpu-1", 1, "gpu-0")
	pod := app("train-0", "gpu-1", "1", b.PodClaimTemplate("gpu", "one-gpu"))
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("train-0-gpu")}}
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Pods: []*corev1.Pod{pod, app("keep", "gpu-2", "1")},
		Nodes: []*corev1.Node{withType(node("gpu-1", g)), withType(node("gpu-2", g))},
		DRA: snapshot.DRA{DeviceClasses: []*resourcev1.DeviceClass{b.DeviceClass("gpu", drv)}, Claims: []*resourcev1.ResourceClaim{owned},
			ClaimTemplates: []*resourcev1.ResourceClaimTemplate{b.ClaimTemplate("one-gpu", b.DeviceRequest("g", "gpu", 1))},
			Slices:         []*resourcev1.ResourceSlice{b.Slice("gpu-1", drv, "gpu", 1, nil)}}}
	if got := run(t, in); slices.Contains(got.removed, "gpu-1") {
		t.Errorf("gpu-1 removed: its GPU pod would go to gpu-2, whose driver never published a device (%+v)", got)
	}
}
