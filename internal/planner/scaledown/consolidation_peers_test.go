package scaledown_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// typed is a node of group ng of the given instance type, zone and
// capacity type, as berth launched it.
func typed(name, cpu, mem string, ng *v1alpha1.NodeGroup, it, zone, ct string) *corev1.Node {
	return b.Node(name, cpu, mem, b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, it,
		v1alpha1.LabelZone, zone, v1alpha1.LabelCapacityType, ct))
}

// TestAGroupAtItsMinSizeGetsACheaperNode: Karpenter's "can replace node"
// (consolidation_test.go, Context("Replace")): one expensive node whose pod
// fits a cheaper type is replaced by it. A group at its minSize keeps its
// size through a replacement in the group (one node out, one in), as the
// lifecycle replacements do (keepingMinSize); the minSize only forbids
// replacing more nodes than it leaves.
func TestAGroupAtItsMinSizeGetsACheaperNode(t *testing.T) {
	for _, tt := range []struct {
		name      string
		minSize   int32
		nodes     int
		wantNodes int
	}{
		{name: "no minSize: the large node is replaced", minSize: 0, nodes: 1, wantNodes: 1},
		{name: "minSize 1, one node: replaced one for one", minSize: 1, nodes: 1, wantNodes: 1},
		{name: "minSize 2, two nodes: each replaced one for one", minSize: 2, nodes: 2, wantNodes: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ng := group("min", func(ng *v1alpha1.NodeGroup) {
				ng.Spec.MinSize = tt.minSize
				ng.Spec.InstanceTypes = nil
				b.InstanceType("small-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))(ng)
				b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"))(ng)
			})
			var nodes []*corev1.Node
			var pods []*corev1.Pod
			for i := range tt.nodes {
				name := fmt.Sprintf("large-%d", i)
				nodes = append(nodes, typed(name, "8", "32Gi", ng, "large-8", "zone-a", "on-demand"))
				// 5 cpu: the pods of two nodes fit on no one node.
				pods = append(pods, app(fmt.Sprintf("w-%d", i), name, "1500m", b.Memory("6Gi"),
					b.PodAntiAffinity(b.AffinityTerm(corev1.LabelHostname, "app", "web"))))
			}
			plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Remove) != 0 {
				t.Fatalf("removed %+v: no node can go outright", plan.Remove)
			}
			got := 0
			if len(plan.Replace) == 1 {
				got = len(plan.Replace[0].Nodes)
				if r := plan.Replace[0]; r.New.InstanceType != "small-2" || r.New.NodeGroup != "min" {
					t.Errorf("replacement %+v, want a small-2 of group min", r)
				}
			}
			if got != tt.wantNodes {
				t.Errorf("replacements %+v, blocked %+v; want %d node replaced by a small-2 (0.10/h instead of 0.40/h)", plan.Replace, plan.Blocked, tt.wantNodes)
			}
		})
	}
}

// TestAReplacementsRoomOnNodesThatStayIsKept: a replacement's plan may
// put some of the replaced node's pods on a node that stays and the rest
// on the new node (oneNewNode allows it). Karpenter plans every other
// consolidation with the pods of the nodes being replaced scheduled first
// (SimulateScheduling: deletingNodePods), so no removal takes the room the
// replacement counted on ("won't delete nodes if it would make a
// non-pending pod go pending"). berth's settle put a replaced node's pods
// on its replacement only: a pod the replacement planned onto a node that
// stays kept no room there, a removal took it, and at the drain the
// replacement was given up (Recheck: NoHome) with the new node bought:
// old and new both ran. (Until the new node is in the cluster the pods
// keep their room on their node: docs/limitations.md.)
//
// Round 1: old (large-8, 0.40/h) holds p1 (3 cpu) and p2 (1 cpu); z (not
// berth's) has 1500m free; w (group g2) holds q (1 cpu) and q2 (2 cpu,
// only g2 takes it: w stays). The replacement: a small-3 (0.10/h) for
// p1, p2 onto a node that stays. Then q2 goes: the next round must keep
// that room for p2. The docs say so: "pods still on nodes being drained
// or replaced (whose replacement is booting for them), take their room
// on the nodes that stay before any removal is tried".
func TestAReplacementsRoomOnNodesThatStayIsKept(t *testing.T) {
	g := group("g", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		b.InstanceType("small-3", "3", "16Gi", b.OnDemand("zone-a", "0.10"))(ng)
		b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"))(ng)
	})
	g2 := group("g2")
	old := typed("old", "8", "32Gi", g, "large-8", "zone-a", "on-demand")
	z := b.Node("z", "4", "16Gi")
	w := node("w", g2)
	onG2 := b.NodeSelector(v1alpha1.LabelNodeGroup, "g2")
	pods := []*corev1.Pod{app("p1", "old", "3"), app("p2", "old", "1"), app("z-1", "z", "2500m"),
		app("q", "w", "1"), app("q2", "w", "2", onG2)}
	groups := []*v1alpha1.NodeGroup{g, g2}
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: groups, Nodes: []*corev1.Node{old, z, w}, Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Remove) != 0 || len(plan.Replace) != 1 || plan.Replace[0].Nodes[0] != "old" || plan.Replace[0].New.InstanceType != "small-3" {
		t.Fatalf("round 1: remove %+v replace %+v blocked %+v; want old replaced by a small-3", plan.Remove, plan.Replace, plan.Blocked)
	}
	t.Logf("round 1: old replaced by %s for %v (%.2f/h instead of %.2f/h); p2 planned onto a node that stays",
		plan.Replace[0].New.InstanceType, plan.Replace[0].New.Pods, plan.Replace[0].NewPrice, plan.Replace[0].OldPrice)

	replaced := typed("old", "8", "32Gi", g, "large-8", "zone-a", "on-demand")
	replaced.Annotations[v1alpha1.AnnotationReplacedBy] = "new"
	later := []*corev1.Pod{pods[0], pods[1], pods[2], pods[3]} // q2 is gone
	for _, tt := range []struct {
		name  string
		nodes []*corev1.Node
	}{
		{name: "the new node is there, with room for p1 only", nodes: []*corev1.Node{replaced, typed("new", "3", "16Gi", g, "small-3", "zone-a", "on-demand"), z, w}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, scaledown.Input{NodeGroups: groups, Nodes: tt.nodes, Pods: later})
			if len(got.removed) != 0 || got.blocked["w"] != "NoHome default/q" {
				t.Errorf("removed %v, w: %q; want w kept (NoHome default/q): z's free room is p2's once old drains", got.removed, got.blocked["w"])
			}
		})
	}
	// Once w went and new is Ready: old's drain finds no home for p2.
	in := scaledown.Input{NodeGroups: groups, Nodes: []*corev1.Node{replaced, typed("new", "3", "16Gi", g, "small-3", "zone-a", "on-demand"), z},
		Pods: []*corev1.Pod{pods[0], pods[1], pods[2], app("q", "z", "1")}}
	if bl, err := scaledown.Recheck(in, "old"); err == nil && bl != nil {
		t.Logf("then old's recheck: %s (%s): its replacement is given up, old and new both stay", bl.Reason, bl.Message)
	}
}

// TestAReplacementAtTheNodeCap: a cluster at its --max-nodes-total still
// gets a cheaper node for a dear one (the node replaced leaves the count
// as its replacement joins it), and a cap below the cluster's size holds
// the replacement back, as it holds back every launch.
func TestAReplacementAtTheNodeCap(t *testing.T) {
	for _, tt := range []struct {
		name     string
		total    int
		replaced bool
	}{
		{name: "at the cap", total: 2, replaced: true},
		{name: "past the cap", total: 1, replaced: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ng := group("g", func(ng *v1alpha1.NodeGroup) {
				ng.Spec.InstanceTypes = nil
				b.InstanceType("small-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))(ng)
				b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"))(ng)
			})
			nodes := []*corev1.Node{typed("large", "8", "32Gi", ng, "large-8", "zone-a", "on-demand"), b.Node("other", "1", "4Gi")}
			pods := []*corev1.Pod{app("w", "large", "1500m", b.Memory("6Gi"))}
			plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods,
				Limits: scaleup.Limits{Nodes: scaleup.NodeCaps{Total: tt.total}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(plan.Replace) == 1 && plan.Replace[0].New.InstanceType == "small-2"; got != tt.replaced || len(plan.Remove) != 0 {
				t.Errorf("replacements %+v, removals %+v; want the large node replaced by a small-2: %v", plan.Replace, plan.Remove, tt.replaced)
			}
		})
	}
}
