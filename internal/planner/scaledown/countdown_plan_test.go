package scaledown_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestAReplacementReachesItsConsolidateAfter: the three small nodes
// of TestReplaceByACheaperNode, with consolidateAfter 1m (the default is
// 30s). A replacement is launched only once every node has counted its
// consolidateAfter (dueAll), so the countdown must survive the rounds in
// between; the controller runs Follow after each plan, as due does.
func TestAReplacementReachesItsConsolidateAfter(t *testing.T) {
	ng := group("mix", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Minute}
		b.InstanceType("small-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))(ng)
		b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(ng)
	})
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 3 {
		name := fmt.Sprintf("small-%d", i)
		nodes = append(nodes, b.Node(name, "2", "8Gi", b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "small-2",
			v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")))
		pods = append(pods, b.Pod(fmt.Sprintf("w-%d", i), b.NodeName(name), b.CPU("1200m"), b.Phase(corev1.PodRunning),
			b.Labels("app", "web"), b.OwnedBy("ReplicaSet", "web")))
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	since := scaledown.Countdown{}
	for round := range 8 {
		now := t0.Add(time.Duration(round) * 10 * time.Second)
		plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: now, Since: since})
		if err != nil {
			t.Fatal(err)
		}
		since.Follow(plan, now)
		t.Logf("at %v: replace %d, blocked %v, countdown %v", now.Sub(t0), len(plan.Replace), len(plan.Blocked), since)
		for _, bl := range plan.Blocked {
			t.Logf("  %s %s", bl.Node, bl.Reason)
		}
	}
	at := t0.Add(70 * time.Second)
	for _, n := range nodes {
		s, ok := since[n.Name]
		if !ok || at.Sub(s) < time.Minute {
			t.Errorf("at 70s node %s counts since %v (counting %v): its replacement is never due (dueAll)", n.Name, s.Sub(t0), ok)
		}
	}
}

// TestABudgetHeldNodeWhosePodsHaveNoHomeStopsCounting: b was
// removable at t0 and counts; at t0+1m a is draining (budget 1 taken) and
// c has no room left for b's 3-cpu pod. b is held back by the budget and
// by its pod's room; the countdown must not run on (Countdown: "a node
// held back by something that is not about its pods' room keeps
// counting"): else the round where the budget frees and room appears
// removes b at once, removable for 0s.
func TestABudgetHeldNodeWhosePodsHaveNoHomeStopsCounting(t *testing.T) {
	ng := group("g", func(ng *v1alpha1.NodeGroup) {
		one := intstrFromInt(1)
		ng.Spec.Disruption.Budget = &one
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 10 * time.Minute}
	})
	a := node("a", ng, b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule))
	bn := node("b", ng)
	c := node("c", ng)
	pods := []*corev1.Pod{app("on-b", "b", "3"), app("on-c", "c", "3500m")}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	since := scaledown.Countdown{"b": t0}
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{a, bn, c}, Pods: pods, Now: now, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	for _, bl := range plan.Blocked {
		t.Logf("blocked %s: %s waits=%v (%s)", bl.Node, bl.Reason, bl.Waits, bl.Message)
	}
	since.Follow(plan, now)
	if s, ok := since["b"]; ok {
		t.Errorf("b keeps counting since %v while its pod fits on no other node", s.Sub(t0))
	}
}
func intstrFromInt(i int) intstr.IntOrString { return intstr.FromInt(i) }

// TestANodeIsNotBothReplacedAndRemovedOrBlocked: a round where no
// node is due yet (consolidateAfter 1m, nothing counting): the waiting
// nodes are offered to replace and then considered again after it.
func TestANodeIsNotBothReplacedAndRemovedOrBlocked(t *testing.T) {
	ng := group("mix", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Minute}
		b.InstanceType("small-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))(ng)
		b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(ng)
	})
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	nodes := []*corev1.Node{b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8"))}
	pods := []*corev1.Pod{app("on-big", "big", "6500m")}
	for i := range 3 {
		name := fmt.Sprintf("small-%d", i)
		nodes = append(nodes, b.Node(name, "2", "8Gi", b.LaunchedBy(ng), lbl("small-2")))
		pods = append(pods, app(fmt.Sprintf("w-%d", i), name, "1200m"))
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: now, Since: scaledown.Countdown{}})
	if err != nil {
		t.Fatal(err)
	}
	replaced := map[string]bool{}
	for _, r := range plan.Replace {
		for _, n := range r.Nodes {
			replaced[n] = true
		}
	}
	t.Logf("replace %+v", plan.Replace)
	for _, r := range plan.Remove {
		if replaced[r.Node] {
			t.Errorf("node %s is both replaced and removed", r.Node)
		}
	}
	for _, bl := range plan.Blocked {
		if replaced[bl.Node] {
			t.Errorf("node %s is replaced and also reported kept: %s (%s)", bl.Node, bl.Reason, bl.Message)
		}
	}
}
