package scenario_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/scenario"
)

// TestLoadBoundsQuantitiesAsTheControllersCacheDoes: apimachinery reads
// "e999999999" as zero with that exponent, and reading its millicores
// took 1.4 s, on every read of the node or pod by the plan. Load
// bounds what it reads as the controller's cache does, so berth plan
// reads zero at once, as the controller would.
func TestLoadBoundsQuantitiesAsTheControllersCacheDoes(t *testing.T) {
	s, err := scenario.Load(strings.NewReader(`apiVersion: v1
kind: Node
metadata: {name: n}
status: {allocatable: {cpu: "e999999999", memory: 4Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "500m", memory: "e999999999"}}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]struct {
		name corev1.ResourceName
		list corev1.ResourceList
	}{
		"the node's allocatable": {corev1.ResourceCPU, s.Nodes[0].Status.Allocatable},
		"the pod's request":      {corev1.ResourceMemory, s.Pods[0].Spec.Containers[0].Resources.Requests},
	} {
		v := r.list[r.name]
		if !quantity.InRange(r.name, v) || !v.IsZero() {
			t.Errorf("%s %s: %s, scale %d; want a zero cheap to read", what, r.name, v.String(), v.AsDec().Scale())
		}
	}
	if cpu := s.Pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.MilliValue() != 500 {
		t.Errorf("the pod's cpu %s, want 500m as written", cpu.String())
	}
}
