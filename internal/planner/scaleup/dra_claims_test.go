package scaleup_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPodsAskingForOtherDevicesGetTheirOwnAllocation: nodes of one
// instance type fill the same way, so the planner reuses what the
// allocator found for one pod on a node holding the same devices; a pod
// whose claims ask for other devices (four GPUs rather than two) must not
// take that answer. Four GPUs fill a node of four; pods of two share
// the others two by two.
func TestPodsAskingForOtherDevicesGetTheirOwnAllocation(t *testing.T) {
	ng := b.NodeGroup("gpu", b.InstanceType("a100-4", "16", "64Gi", b.OnDemand("zone-a", "6.00")),
		b.Devices(benchDriver, "gpu", 4, map[string]string{"model": "a100"}), b.Size(0, 10))
	a100 := `device.attributes["gpu.example.com"].model == "a100"`
	dra := snapshot.DRA{
		DeviceClasses: []*resourcev1.DeviceClass{b.DeviceClass("gpu", benchDriver)},
		ClaimTemplates: []*resourcev1.ResourceClaimTemplate{
			b.ClaimTemplate("two", b.DeviceRequest("gpu", "gpu", 2, a100)),
			b.ClaimTemplate("four", b.DeviceRequest("gpu", "gpu", 4, a100)),
		},
	}
	pending := []*corev1.Pod{
		b.Pod("a-two", b.CPU("1"), b.PodClaimTemplate("gpu", "two")),
		b.Pod("b-four", b.CPU("1"), b.PodClaimTemplate("gpu", "four")),
		b.Pod("c-two", b.CPU("1"), b.PodClaimTemplate("gpu", "two")),
		b.Pod("d-two", b.CPU("1"), b.PodClaimTemplate("gpu", "two")),
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending, DRA: dra})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"new zone-a/on-demand/a100-4: a-two,c-two", "new zone-a/on-demand/a100-4: b-four", "new zone-a/on-demand/a100-4: d-two"}
	if diff := cmp.Diff(want, summary(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestClaimsWithHugeNumbersInSelectorsAreNotEvaluated: anyone who can
// create a claim can write a selector that hands quantity() or
// isQuantity() a number like 1e2147483648, on which apimachinery's parser
// does not return: written plainly, with CEL escapes, or built when the
// selector runs. Such a pod is unschedulable with a reason that says
// why; pods whose selectors call quantity() on ordinary numbers, and the
// other pods, are planned.
func TestClaimsWithHugeNumbersInSelectorsAreNotEvaluated(t *testing.T) {
	for _, tc := range []struct {
		name, selector, reason string
	}{
		{"written plainly", `quantity("1e2147483648").isGreaterThan(quantity("1"))`, "the number 1e2147483648, with an exponent of more than 3 digits"},
		{"written with a CEL escape", `quantity("1\u00652147483648").isGreaterThan(quantity("1"))`, "the number 1e2147483648, with an exponent of more than 3 digits"},
		{"written with an octal escape", `isQuantity("1\1452147483648")`, "the number 1e2147483648, with an exponent of more than 3 digits"},
		{"with no digits before the exponent", `quantity("e999999999").isGreaterThan(quantity("1"))`, "the number e999999999, with an exponent of more than 3 digits"},
		{"joined when the selector runs", `quantity("1e" + "2147483648").isGreaterThan(quantity("1"))`, "calls quantity() on a value computed when it runs"},
		{"read from a device attribute", `isQuantity(device.attributes["gpu.example.com"].model)`, "calls isQuantity() on a value computed when it runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ng := b.NodeGroup("gpu", b.InstanceType("a100-4", "16", "64Gi", b.OnDemand("zone-a", "6.00")),
				b.Devices(benchDriver, "gpu", 4, map[string]string{"model": "a100"}), b.Size(0, 10))
			dra := snapshot.DRA{
				DeviceClasses: []*resourcev1.DeviceClass{b.DeviceClass("gpu", benchDriver)},
				ClaimTemplates: []*resourcev1.ResourceClaimTemplate{
					b.ClaimTemplate("two", b.DeviceRequest("gpu", "gpu", 2, `device.attributes["gpu.example.com"].model == "a100"`)),
					b.ClaimTemplate("sized", b.DeviceRequest("gpu", "gpu", 1, `quantity("40Gi").isLessThan(quantity("1e12"))`)),
					b.ClaimTemplate("huge", b.DeviceRequest("gpu", "gpu", 1, tc.selector)),
				},
			}
			pending := []*corev1.Pod{
				b.Pod("a-two", b.CPU("1"), b.PodClaimTemplate("gpu", "two")),
				b.Pod("b-huge", b.CPU("1"), b.PodClaimTemplate("gpu", "huge")),
				b.Pod("c-sized", b.CPU("1"), b.PodClaimTemplate("gpu", "sized")),
			}
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending, DRA: dra})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"new zone-a/on-demand/a100-4: a-two,c-sized", "unschedulable: b-huge"}, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod.Name != "b-huge" ||
				!strings.Contains(plan.Unschedulable[0].Message, tc.reason) {
				t.Errorf("unschedulable %+v, want b-huge with a reason containing %q", plan.Unschedulable, tc.reason)
			}
		})
	}
}
