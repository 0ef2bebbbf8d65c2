package predicates_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

const gpuDriver = "gpu.example.com"

// draScenario is a cluster with DRA objects, a pod and the node to try.
type draScenario struct {
	name      string
	slices    []*resourcev1.ResourceSlice
	claims    []*resourcev1.ResourceClaim
	templates []*resourcev1.ResourceClaimTemplate
	groups    []*schedulingv1alpha2.PodGroup
	pod       *corev1.Pod
	node      string
	want      predicates.Code
	// wantMessage is a substring of the status message.
	wantMessage string
}

func draSnapshot(t *testing.T, dra snapshot.DRA, nodes ...*corev1.Node) *snapshot.Snapshot {
	t.Helper()
	dra.DeviceClasses = append(dra.DeviceClasses, b.DeviceClass("gpu", gpuDriver))
	in := snapshot.Input{DRA: dra}
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
	}
	s, err := snapshot.New(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDynamicResources(t *testing.T) {
	a100 := map[string]string{"model": "a100"}
	twoGPUs := b.ClaimTemplate("two-gpus", b.DeviceRequest("gpus", "gpu", 2))
	twoA100 := b.ClaimTemplate("two-a100", b.DeviceRequest("gpus", "gpu", 2, `device.attributes["gpu.example.com"].model == "a100"`))
	tests := []draScenario{
		{name: "a pod whose template asks for two gpus fits a node publishing two",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)}, templates: []*resourcev1.ResourceClaimTemplate{twoGPUs},
			pod: b.Pod("p", b.PodClaimTemplate("gpu", "two-gpus")), node: "n1", want: ok},
		{name: "a pod asking for two gpus does not fit a node publishing one",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 1, a100)}, templates: []*resourcev1.ResourceClaimTemplate{twoGPUs},
			pod: b.Pod("p", b.PodClaimTemplate("gpu", "two-gpus")), node: "n1", want: unresolvable, wantMessage: "cannot allocate all claims"},
		{name: "a pod whose CEL selector wants a100s does not fit a node of t4s",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 4, map[string]string{"model": "t4"})}, templates: []*resourcev1.ResourceClaimTemplate{twoA100},
			pod: b.Pod("p", b.PodClaimTemplate("gpu", "two-a100")), node: "n1", want: unresolvable, wantMessage: `model == "a100"`},
		{name: "a node without slices has no devices",
			templates: []*resourcev1.ResourceClaimTemplate{twoGPUs},
			pod:       b.Pod("p", b.PodClaimTemplate("gpu", "two-gpus")), node: "n1", want: unresolvable},
		{name: "devices held by another pod's allocated claim are not free",
			slices:    []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			claims:    []*resourcev1.ResourceClaim{b.AllocatedOn(b.Claim("other", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 1, "gpu-0")},
			templates: []*resourcev1.ResourceClaimTemplate{twoGPUs},
			pod:       b.Pod("p", b.PodClaimTemplate("gpu", "two-gpus")), node: "n1", want: unresolvable},
		{name: "a device allocated with admin access still counts as free",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			claims: []*resourcev1.ResourceClaim{func() *resourcev1.ResourceClaim {
				c := b.AllocatedOn(b.Claim("monitor", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 1, "gpu-0")
				c.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
				return c
			}()},
			templates: []*resourcev1.ResourceClaimTemplate{twoGPUs},
			pod:       b.Pod("p", b.PodClaimTemplate("gpu", "two-gpus")), node: "n1", want: ok},
		{name: "a pod naming a claim that does not exist waits",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			pod:    b.Pod("p", b.PodClaim("gpu", "missing")), node: "n1", want: unresolvable, wantMessage: `waiting for resourceclaim "missing"`},
		{name: "a pod naming a template that does not exist waits",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			pod:    b.Pod("p", b.PodClaimTemplate("gpu", "missing")), node: "n1", want: unresolvable, wantMessage: `resourceclaimtemplate "missing" not found`},
		{name: "a shared claim allocated on n1 keeps its next pod off n2",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100), b.Slice("n2", gpuDriver, "gpu", 2, a100)},
			claims: []*resourcev1.ResourceClaim{b.AllocatedOn(b.Claim("shared", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 1, "gpu-0")},
			pod:    b.Pod("p", b.PodClaim("gpu", "shared")), node: "n2", want: unresolvable, wantMessage: predicates.ReasonClaimNotAvailable},
		{name: "a shared claim allocated on n1 takes its next pod on n1",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			claims: []*resourcev1.ResourceClaim{b.AllocatedOn(b.Claim("shared", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 1, "gpu-0")},
			pod:    b.Pod("p", b.PodClaim("gpu", "shared")), node: "n1", want: ok},
		{name: "a shared claim with 256 reservations takes no more pods",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			claims: []*resourcev1.ResourceClaim{b.AllocatedOn(b.Claim("shared", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 256, "gpu-0")},
			pod:    b.Pod("p", b.PodClaim("gpu", "shared")), node: "n1", want: unresolvable, wantMessage: "reserved for 256 consumers"},
		{name: "a shared claim with 255 reservations takes one more pod",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			claims: []*resourcev1.ResourceClaim{b.AllocatedOn(b.Claim("shared", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 255, "gpu-0")},
			pod:    b.Pod("p", b.PodClaim("gpu", "shared")), node: "n1", want: ok},
		{name: "a PodGroup claim at 256 reservations already held by the group takes another of its pods",
			slices: []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, a100)},
			claims: []*resourcev1.ResourceClaim{func() *resourcev1.ResourceClaim {
				c := b.AllocatedOn(b.Claim("group-gpu", b.DeviceRequest("g", "gpu", 1)), gpuDriver, "n1", 255, "gpu-0")
				c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
					APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "train", UID: "uid-podgroup-train"})
				return c
			}()},
			groups: []*schedulingv1alpha2.PodGroup{b.PodGroup("train", map[string]string{"gpu": "group-gpu"})},
			pod:    b.Pod("p", b.PodClaim("gpu", "group-gpu"), b.InPodGroup("train")), node: "n1", want: ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := draSnapshot(t, snapshot.DRA{Slices: tt.slices, Claims: tt.claims, ClaimTemplates: tt.templates, PodGroups: tt.groups},
				b.Node("n1", "8", "32Gi"), b.Node("n2", "8", "32Gi"))
			c, err := s.Classify(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			got := predicates.DynamicResources{}.Filter(s, c, s.Node(tt.node))
			if got.Code != tt.want || !strings.Contains(got.Reason+" "+got.Message(), tt.wantMessage) {
				t.Errorf("got %v %q (%s), want %v containing %q", got.Code, got.Reason, got.Message(), tt.want, tt.wantMessage)
			}
		})
	}
}

// TestDynamicResourcesPlanAllocations places pods through the snapshot and
// checks that what the plan allocates is held, pins shared claims, and is
// undone by Revert.
func TestDynamicResourcesPlanAllocations(t *testing.T) {
	slices := []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, nil), b.Slice("n2", gpuDriver, "gpu", 2, nil)}
	dra := snapshot.DRA{
		Slices:         slices,
		ClaimTemplates: []*resourcev1.ResourceClaimTemplate{b.ClaimTemplate("one-gpu", b.DeviceRequest("g", "gpu", 1))},
		Claims:         []*resourcev1.ResourceClaim{b.Claim("shared", b.DeviceRequest("g", "gpu", 1))},
	}
	s := draSnapshot(t, dra, b.Node("n1", "8", "32Gi"), b.Node("n2", "8", "32Gi"))
	f := predicates.DynamicResources{}
	place := func(name string, node string, opts ...b.PodOption) {
		t.Helper()
		c, err := s.Classify(b.Pod(name, opts...))
		if err != nil {
			t.Fatal(err)
		}
		if st := f.Filter(s, c, s.Node(node)); st.Failed() {
			t.Fatalf("%s does not fit %s: %s", name, node, st.Message())
		}
		s.AddPod(&snapshot.Pod{Pod: b.Pod(name, opts...), Class: c}, s.Node(node))
	}
	check := func(what, name, node string, want predicates.Code, opts ...b.PodOption) {
		t.Helper()
		c, err := s.Classify(b.Pod(name, opts...))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Filter(s, c, s.Node(node)); got.Code != want {
			t.Errorf("%s: got %v (%s), want %v", what, got.Code, got.Message(), want)
		}
	}
	perPod := b.PodClaimTemplate("gpu", "one-gpu")
	shared := b.PodClaim("gpu", "shared")

	s.Fork()
	place("a", "n1", perPod)
	place("b", "n1", perPod)
	check("two per-pod claims use both gpus of n1, a third does not fit", "c", "n1", unresolvable, perPod)
	check("n2's gpus are still free", "c", "n2", ok, perPod)
	place("s1", "n2", shared)
	check("the shared claim's second pod is pinned to n2", "s2", "n1", unresolvable, shared)
	check("the shared claim's second pod fits n2 without another device", "s2", "n2", ok, shared)
	if got := s.ClaimUsers(snapshot.ClaimKey{Namespace: "default", Name: "shared"}); got != 1 {
		t.Errorf("shared claim users = %d, want 1", got)
	}
	s.Revert()

	check("after Revert n1's gpus are free again", "c", "n1", ok, perPod)
	check("after Revert the shared claim is not pinned", "s2", "n1", ok, shared)
	if got := s.ClaimNode(snapshot.ClaimKey{Namespace: "default", Name: "shared"}); got != nil {
		t.Errorf("after Revert the shared claim is still on %s", got.Name)
	}
}

// TestPodGroupTemplateClaimIsOneClaimForTheGroup: a PodGroup claim made
// from a template that the controller has not created yet is one claim
// for all the group's pods: the first pod allocates it, the others follow
// it to that node and take no further devices; a pod outside the group
// with the same template gets a claim of its own.
func TestPodGroupTemplateClaimIsOneClaimForTheGroup(t *testing.T) {
	pg := b.PodGroup("train", nil)
	pg.Spec.ResourceClaims = []schedulingv1alpha2.PodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("two-gpus")}}
	s := draSnapshot(t, snapshot.DRA{
		Slices:         []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, nil), b.Slice("n2", gpuDriver, "gpu", 2, nil)},
		ClaimTemplates: []*resourcev1.ResourceClaimTemplate{b.ClaimTemplate("two-gpus", b.DeviceRequest("g", "gpu", 2))},
		PodGroups:      []*schedulingv1alpha2.PodGroup{pg},
	}, b.Node("n1", "8", "32Gi"), b.Node("n2", "8", "32Gi"))
	member := []b.PodOption{b.PodClaimTemplate("gpus", "two-gpus"), b.InPodGroup("train")}
	f := predicates.DynamicResources{}
	classify := func(name string, opts ...b.PodOption) *snapshot.Class {
		c, err := s.Classify(b.Pod(name, opts...))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := classify("w0", member...)
	if st := f.Filter(s, c, s.Node("n1")); st.Failed() {
		t.Fatalf("first member does not fit n1: %s", st.Message())
	}
	s.AddPod(&snapshot.Pod{Pod: b.Pod("w0", member...), Class: c}, s.Node("n1"))
	if st := f.Filter(s, classify("w1", member...), s.Node("n1")); st.Failed() {
		t.Errorf("second member does not fit n1, where the group's claim is: %s", st.Message())
	}
	if st := f.Filter(s, classify("w1", member...), s.Node("n2")); !st.Failed() {
		t.Error("second member fits n2, away from the group's claim")
	}
	if st := f.Filter(s, classify("solo", b.PodClaimTemplate("gpus", "two-gpus")), s.Node("n1")); !st.Failed() {
		t.Error("a pod outside the group fits n1, whose two gpus the group's claim holds")
	}
}
