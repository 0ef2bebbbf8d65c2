package scaleup_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestCAUpcomingNodes: Cluster Autoscaler plans pending pods on upcoming
// nodes (clusterstate GetUpcomingNodes: registered not started, or not
// registered yet) before it scales up, and counts them in the group's
// size; an unready node past its provision time is no upcoming node.
func TestCAUpcomingNodes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	g := b.NodeGroup("g", b.Size(0, 3), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	mk := func(name string, age time.Duration, opts ...b.NodeOption) *corev1.Node {
		n := groupNode(name, g, "m-4", "zone-a", v1alpha1.CapacityTypeOnDemand)
		b.LaunchedBy(g)(n)
		n.CreationTimestamp = metav1.NewTime(now.Add(-age))
		for _, o := range opts {
			o(n)
		}
		return n
	}
	notReadyTaint := b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)
	cases := []struct {
		name    string
		nodes   []*corev1.Node
		bound   []*corev1.Pod
		pending []*corev1.Pod
		want    []string
	}{
		{name: "a booting node takes the pod", nodes: []*corev1.Node{mk("g-1", time.Hour), mk("g-2", 2*time.Minute, b.Booting(), notReadyTaint)},
			bound: []*corev1.Pod{boundTo(b.Pod("full", b.CPU("4")), "g-1")}, pending: []*corev1.Pod{b.Pod("p", b.CPU("3"))},
			want: []string{"on g-2: p"}},
		{name: "a booting node takes what fits, a new node the rest", nodes: []*corev1.Node{mk("g-1", time.Hour), mk("g-2", 2*time.Minute, b.Booting(), notReadyTaint)},
			bound: []*corev1.Pod{boundTo(b.Pod("full", b.CPU("4")), "g-1")}, pending: []*corev1.Pod{b.Pod("p", b.CPU("3")), b.Pod("q", b.CPU("3"))},
			want: []string{"new zone-a/on-demand/m-4: q", "on g-2: p"}},
		{name: "a node down (was Ready) takes no pod but counts in maxSize", nodes: []*corev1.Node{mk("g-1", time.Hour), mk("g-2", time.Hour, b.NotReady(), notReadyTaint)},
			bound: []*corev1.Pod{boundTo(b.Pod("full", b.CPU("4")), "g-1")}, pending: []*corev1.Pod{b.Pod("p", b.CPU("3")), b.Pod("q", b.CPU("3"))},
			want: []string{"new zone-a/on-demand/m-4: p", "unschedulable: q"}},
		{name: "a node that never came up past the provision time takes no pod", nodes: []*corev1.Node{mk("g-1", time.Hour, b.Booting(), notReadyTaint)},
			pending: []*corev1.Pod{b.Pod("p", b.CPU("3"))},
			want:    []string{"new zone-a/on-demand/m-4: p"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: tc.nodes, Pods: tc.bound, Pending: tc.pending,
				Now: now, LaunchGrace: 15 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
