package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPlansWherePodsTradePlaces: small rounds whose cheapest plan needs
// several pods to move at once, which the greedy pass and its single
// moves do not find. The expectations are worked out by hand in each
// case's comment.
func TestPlansWherePodsTradePlaces(t *testing.T) {
	onDemand := b.NodeSelector(v1alpha1.LabelCapacityType, string(v1alpha1.CapacityTypeOnDemand))
	ng := b.NodeGroup("general", b.InstanceType("m-2", "2", "4Gi",
		b.OnDemand("zone-a", "0.0838"), b.Spot("zone-a", "0.0452"), b.OnDemand("zone-b", "0.0822")))
	// Three on-demand nodes in zone-a (2 cpu, 4Gi) with an agent and a
	// workload on each: free old-1 612m/1850Mi, old-2 1116m/752Mi+1664Mi
	// = 2416Mi, old-3 306m/2416Mi.
	nodes := []*corev1.Node{
		groupNode("old-1", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand),
		groupNode("old-2", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand),
		groupNode("old-3", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand),
	}
	bound := []*corev1.Pod{
		boundTo(b.Pod("used-1", b.CPU("1188m"), b.Memory("2019305717")), "old-1"),
		boundTo(b.Pod("used-2", b.CPU("684m"), b.Memory("1425392271")), "old-2"),
		boundTo(b.Pod("used-3", b.CPU("1494m"), b.Memory("1425392271")), "old-3"),
		boundTo(b.Pod("agent-1", b.CPU("200m"), b.Memory("320Mi")), "old-1"),
		boundTo(b.Pod("agent-2", b.CPU("200m"), b.Memory("320Mi")), "old-2"),
		boundTo(b.Pod("agent-3", b.CPU("200m"), b.Memory("320Mi")), "old-3"),
	}
	runPlanCases(t, []planCase{{
		// steady pods (600m/1664Mi) need on-demand: one fits on old-1
		// and one on old-2 (old-3 has 306m), else they need a new
		// on-demand node (0.0822 in zone-b). big (1100m/1728Mi) fits
		// only on old-2 of the existing nodes; the greedy pass, biggest
		// first, puts it there and a steady pod goes to zone-b, and no
		// single move undoes that (big must leave for a new node before
		// a steady pod can take its place). Cheapest: the steady pods on
		// old-1 and old-2 (752Mi left there, too little for a small pod
		// of 1Gi), one small pod on old-3 (306m), big and the other small
		// pod on one spot node (0.0452).
		name:   "pods that need on-demand take the existing nodes and the others share one spot node",
		groups: []*v1alpha1.NodeGroup{ng}, nodes: nodes, bound: bound,
		pending: []*corev1.Pod{
			b.Pod("steady-1", b.CPU("600m"), b.Memory("1664Mi"), b.Labels("app", "steady"), onDemand),
			b.Pod("small-1", b.CPU("300m"), b.Memory("1Gi"), b.Labels("app", "small")),
			b.Pod("big", b.CPU("1100m"), b.Memory("1728Mi"), b.Labels("app", "big")),
			b.Pod("small-2", b.CPU("300m"), b.Memory("1Gi"), b.Labels("app", "small")),
			b.Pod("steady-2", b.CPU("600m"), b.Memory("1664Mi"), b.Labels("app", "steady"), onDemand),
		},
		want: []string{"new zone-a/spot/m-2: big,small-2", "on old-1: steady-1", "on old-2: steady-2", "on old-3: small-1"},
	}})
}
