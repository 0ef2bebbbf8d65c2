package scaleup_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// planCase is a cluster, the pods to place, and the plan a user expects,
// written as summary writes it.
type planCase struct {
	name    string
	groups  []*v1alpha1.NodeGroup
	nodes   []*corev1.Node
	bound   []*corev1.Pod
	pending []*corev1.Pod
	want    []string
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: tc.groups, Nodes: tc.nodes, Pods: tc.bound, Pending: tc.pending})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			// As a controller plans: on a model kept from round to round,
			// built by the first round and brought up to date by the
			// second; nothing a round does may show in the next.
			base := snapshot.NewBase()
			for round := range 2 {
				plan, err := scaleup.Run(scaleup.Input{NodeGroups: tc.groups, Nodes: tc.nodes, Pods: tc.bound, Pending: tc.pending, Base: base})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
					t.Errorf("round %d on a snapshot.Base: plan (-want +got):\n%s", round, diff)
				}
			}
		})
	}
}

// summary is a plan as sorted lines: "new zone/capacity/type: pods" per new
// node, "on node: pods" per existing node, "unschedulable: pods".
func summary(plan *scaleup.Plan) []string {
	var out []string
	names := func(refs []scaleup.PodRef) string {
		var s []string
		for _, r := range refs {
			s = append(s, r.Name)
		}
		slices.Sort(s)
		return strings.Join(s, ",")
	}
	for _, n := range plan.NewNodes {
		out = append(out, fmt.Sprintf("new %s/%s/%s: %s", n.Zone, n.CapacityType, n.InstanceType, names(n.Pods)))
	}
	on := map[string][]scaleup.PodRef{}
	for _, pl := range plan.ExistingNodePlacements {
		on[pl.Node] = append(on[pl.Node], pl.Pod)
	}
	for node, refs := range on {
		out = append(out, fmt.Sprintf("on %s: %s", node, names(refs)))
	}
	var unsched []scaleup.PodRef
	for _, u := range plan.Unschedulable {
		unsched = append(unsched, u.Pod)
	}
	if len(unsched) > 0 {
		out = append(out, "unschedulable: "+names(unsched))
	}
	slices.Sort(out)
	return out
}

// groupNode is a Ready node of group ng launched from instance type it
// and offering off, with the labels berth gives it.
func groupNode(name string, ng *v1alpha1.NodeGroup, it, zone string, ct v1alpha1.CapacityType) *corev1.Node {
	t, off := ng.FindOffering(it, zone, ct)
	if t == nil {
		panic("no offering " + it + "/" + zone + "/" + string(ct))
	}
	n := b.Node(name, t.Capacity.Cpu().String(), t.Capacity.Memory().String())
	for k, v := range ng.NodeLabels(t, off) {
		n.Labels[k] = v
	}
	return n
}

// boundTo is pod p bound to node.
func boundTo(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	return p
}

// replicas are n pods web-1..web-n made with opts.
func replicas(prefix string, n int, opts ...b.PodOption) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 1; i <= n; i++ {
		out = append(out, b.Pod(fmt.Sprintf("%s-%d", prefix, i), opts...))
	}
	return out
}
