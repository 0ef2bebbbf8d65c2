package scaleup_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestANodeIsPlannedWithTheDevicesItsDriversPublished: a node of a group
// whose type has a GPU (driver gpu) and a NIC (driver nic) is planned with
// its type's devices only while it boots, driver by driver: a node a
// minute old whose GPU driver has published and NIC driver not yet takes
// the pod that wants a NIC; a node up for a day whose drivers never
// published has no device, and a pod that claims one gets a new node
// (kube-scheduler would never put it there).
func TestANodeIsPlannedWithTheDevicesItsDriversPublished(t *testing.T) {
	const nicDriver = "nic.example.com"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("gpu", b.Size(0, 10), b.InstanceType("g-1", "4", "16Gi", b.OnDemand("zone-a", "1.10")),
		b.Devices(benchDriver, "gpu", 1, nil), b.Devices(nicDriver, "nic", 1, nil))
	dra := snapshot.DRA{
		DeviceClasses: []*resourcev1.DeviceClass{b.DeviceClass("gpu", benchDriver), b.DeviceClass("nic", nicDriver)},
		ClaimTemplates: []*resourcev1.ResourceClaimTemplate{b.ClaimTemplate("one-gpu", b.DeviceRequest("gpu", "gpu", 1)),
			b.ClaimTemplate("one-nic", b.DeviceRequest("nic", "nic", 1))},
	}
	tests := []struct {
		name      string
		age       time.Duration
		published []*resourcev1.ResourceSlice
		pod       *corev1.Pod
		want      []string
	}{
		{name: "booting, its NIC driver not published yet", age: time.Minute, published: []*resourcev1.ResourceSlice{b.Slice("n", benchDriver, "gpu", 1, nil)},
			pod: b.Pod("net", b.CPU("1"), b.PodClaimTemplate("nic", "one-nic")), want: []string{"on n: net"}},
		{name: "booting, nothing published yet", age: time.Minute,
			pod: b.Pod("train", b.CPU("1"), b.PodClaimTemplate("gpu", "one-gpu")), want: []string{"on n: train"}},
		{name: "up for a day, nothing ever published", age: 24 * time.Hour,
			pod: b.Pod("train", b.CPU("1"), b.PodClaimTemplate("gpu", "one-gpu")), want: []string{"new zone-a/on-demand/g-1: train"}},
		{name: "up for a day, its GPU published", age: 24 * time.Hour, published: []*resourcev1.ResourceSlice{b.Slice("n", benchDriver, "gpu", 1, nil)},
			pod: b.Pod("train", b.CPU("1"), b.PodClaimTemplate("gpu", "one-gpu")), want: []string{"on n: train"}},
		{name: "up for a day, its NIC driver never published", age: 24 * time.Hour, published: []*resourcev1.ResourceSlice{b.Slice("n", benchDriver, "gpu", 1, nil)},
			pod: b.Pod("net", b.CPU("1"), b.PodClaimTemplate("nic", "one-nic")), want: []string{"new zone-a/on-demand/g-1: net"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := groupNode("n", ng, "g-1", "zone-a", v1alpha1.CapacityTypeOnDemand)
			b.LaunchedBy(ng)(n)
			if tt.age < scaleup.DefaultLaunchGrace {
				b.Booting()(n)
			}
			n.CreationTimestamp = metav1.NewTime(now.Add(-tt.age))
			in := dra
			in.Slices = tt.published
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n}, DRA: in,
				Pending: []*corev1.Pod{tt.pod}, Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
