package dynamicresources_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

const gpuDriver = "gpu.example.com"

// option is an option of a planned node, for the model's O.
type option struct{}

func (*option) Devices() (*corev1.Node, []*resourcev1.ResourceSlice) { return nil, nil }

// nodes are existing nodes by name, for the model's N.
type nodes map[string]*corev1.Node

func (ns nodes) Host(n string) dynamicresources.Host[*option] {
	return dynamicresources.Host[*option]{Node: ns[n]}
}

func (nodes) Fitting(string, int, *option, []*option) []*option { return nil }

// verdicts name the verdicts in failure messages.
var verdicts = map[dynamicresources.Verdict]string{
	dynamicresources.DevicesFit: "DevicesFit", dynamicresources.ClaimsPending: "ClaimsPending",
	dynamicresources.ClaimElsewhere: "ClaimElsewhere", dynamicresources.ClaimFull: "ClaimFull",
	dynamicresources.DevicesShort: "DevicesShort", dynamicresources.ClaimInvalid: "ClaimInvalid",
}

// request resolves a pod's claims as class id.
func request(t *testing.T, m *dynamicresources.Model[string, *option], id int, pod *corev1.Pod) dynamicresources.Request {
	t.Helper()
	claims, wait := m.Resolve(pod)
	if wait != "" {
		t.Fatalf("pod %s waits: %s", pod.Name, wait)
	}
	return dynamicresources.Request{Class: id, Claims: claims}
}

// TestTakingOffAndPlacingAgainRestoresDevices follows a shared claim's
// devices through what the snapshot's journal does: the first user
// allocates the claim, the last user taken off (not the first) releases
// it and keeps its devices, and placing that pod again (a Revert) holds
// the same devices.
func TestTakingOffAndPlacingAgainRestoresDevices(t *testing.T) {
	m := dynamicresources.New[string, *option](dynamicresources.Objects{
		DeviceClasses:  []*resourcev1.DeviceClass{b.DeviceClass("gpu", gpuDriver)},
		ClaimTemplates: []*resourcev1.ResourceClaimTemplate{b.ClaimTemplate("two-gpus", b.DeviceRequest("g", "gpu", 2))},
		Claims:         []*resourcev1.ResourceClaim{b.Claim("shared", b.DeviceRequest("g", "gpu", 1))},
		Slices:         []*resourcev1.ResourceSlice{b.Slice("n1", gpuDriver, "gpu", 2, nil)},
	}, nodes{"n1": b.Node("n1", "4", "8Gi"), "n2": b.Node("n2", "4", "8Gi")})
	shared := request(t, m, 0, b.Pod("shared", b.PodClaim("gpu", "shared")))
	twoGPUs := request(t, m, 1, b.Pod("two", b.PodClaimTemplate("gpu", "two-gpus")))
	key := dynamicresources.ClaimKey{Namespace: "default", Name: "shared"}
	expect := func(step string, wantNode string, wantUsers int, wantTwo dynamicresources.Verdict) {
		t.Helper()
		m.Changed()
		if got := m.ClaimNode(key); got != wantNode {
			t.Errorf("%s: claim on node %q, want %q", step, got, wantNode)
		}
		if got := m.ClaimUsers(key); got != wantUsers {
			t.Errorf("%s: claim has %d users, want %d", step, got, wantUsers)
		}
		if got, why := m.Check(twoGPUs, "n1", false).Result(); got != wantTwo {
			t.Errorf("%s: a pod asking for two gpus on n1 gets %s (%s), want %s", step, verdicts[got], why, verdicts[wantTwo])
		}
	}

	first := m.Check(shared, "n1", true).Placement()
	if first == nil {
		t.Fatal("the first user of the shared claim allocates nothing")
	}
	m.Place("n1", first, shared.Claims)
	expect("first user placed", "n1", 1, dynamicresources.DevicesShort)
	if got, _ := m.Check(shared, "n2", false).Result(); got != dynamicresources.ClaimElsewhere {
		t.Errorf("a second user of the claim on n2 gets %s, want ClaimElsewhere", verdicts[got])
	}
	second := m.Check(shared, "n1", true).Placement()
	m.Place("n1", second, shared.Claims)
	expect("second user placed", "n1", 2, dynamicresources.DevicesShort)

	// The first user, which allocated the claim, leaves first: the
	// devices stay with the claim, and go with its last user.
	m.Unplace("n1", first, shared.Claims)
	expect("first user taken off", "n1", 1, dynamicresources.DevicesShort)
	kept := m.Unplace("n1", second, shared.Claims)
	expect("last user taken off", "", 0, dynamicresources.DevicesFit)

	m.Place("n1", kept, shared.Claims)
	expect("last user placed again", "n1", 1, dynamicresources.DevicesShort)
}
