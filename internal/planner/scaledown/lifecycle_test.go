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
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// spotGroup offers m-2 as spot (cheap) and on-demand in zone-a.
func spotGroup(mutate ...func(*v1alpha1.NodeGroup)) *v1alpha1.NodeGroup {
	return group("life", append([]func(*v1alpha1.NodeGroup){func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		b.InstanceType("m-2", "2", "8Gi", b.Spot("zone-a", "0.03"), b.OnDemand("zone-a", "0.10"))(ng)
	}}, mutate...)...)
}

// spotNode is a node of ng bought as m-2 spot, launched with ng's spec.
func spotNode(name string, ng *v1alpha1.NodeGroup, opts ...b.NodeOption) *corev1.Node {
	return b.Node(name, "2", "8Gi", append([]b.NodeOption{b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "m-2",
		v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "spot"), b.NodeAnnotation(v1alpha1.AnnotationLaunchHash, ng.LaunchHash())}, opts...)...)
}

// driftGroups are spotGroup as its nodes were launched, and as it is now:
// a template label added (its nodes drifted), and budget when not nil.
func driftGroups(budget *intstr.IntOrString) (launchedWith, drifted *v1alpha1.NodeGroup) {
	launchedWith = spotGroup()
	drifted = spotGroup(b.TemplateLabel("tier", "gold"), func(ng *v1alpha1.NodeGroup) {
		if budget != nil {
			ng.Spec.Disruption.Budget = budget
		}
	})
	drifted.UID = launchedWith.UID
	return launchedWith, drifted
}

var notice = b.NodeTaint(v1alpha1.TaintInterruption, "", corev1.TaintEffectNoSchedule)

// aged sets a node's creation d before planNow.
func aged(d time.Duration) b.NodeOption {
	return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(planNow.Add(-d)) }
}

// planNow is when disruptions plans.
var planNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func disruptions(t *testing.T, in scaledown.Input) (map[string]scaledown.Disruption, map[string]string) {
	t.Helper()
	in.Now = planNow
	plan, err := scaledown.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]scaledown.Disruption{}
	for _, d := range plan.Disruptions {
		got[d.Node] = d
	}
	blocked := map[string]string{}
	for _, bl := range plan.Blocked {
		blocked[bl.Node] = string(bl.Reason)
	}
	return got, blocked
}

// TestAnInterruptedNodeIsReplacedFromAnotherPool: the interrupted spot
// node's pod fits on no other node: a replacement is planned at once, not
// from the interrupted pool (on-demand, although spot is cheaper).
func TestAnInterruptedNodeIsReplacedFromAnotherPool(t *testing.T) {
	ng := spotGroup()
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{spotNode("a", ng, notice)},
		Pods: []*corev1.Pod{app("w", "a", "1500m")}})
	d, ok := got["a"]
	if !ok || d.Reason != v1alpha1.ReasonInterrupted || d.Deadline == nil {
		t.Fatalf("disruption of a: %+v, want Interrupted with a deadline", d)
	}
	if len(d.Launch) != 1 || d.Launch[0].CapacityType != "on-demand" {
		t.Errorf("replacements %+v, want one on-demand node (the spot pool is interrupted)", d.Launch)
	}
}

// TestAnInterruptedNodeWhosePodsFitElsewhereIsDrainedAtOnce: no launch.
func TestAnInterruptedNodeWhosePodsFitElsewhereIsDrainedAtOnce(t *testing.T) {
	ng := spotGroup()
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{spotNode("a", ng, notice), spotNode("b", ng)},
		Pods: []*corev1.Pod{app("w", "a", "500m")}})
	if d, ok := got["a"]; !ok || len(d.Launch) != 0 {
		t.Errorf("disruption of a: %+v (%v), want it drained with no launch", d, ok)
	}
}

// TestAnInterruptedNodesPodsFindNoHomeOnADeadNode: b went NotReady three
// hours ago (its not-ready taint is the node lifecycle's, not a boot's):
// the interrupted node's pod needs a replacement, not a place on b.
func TestAnInterruptedNodesPodsFindNoHomeOnADeadNode(t *testing.T) {
	ng := spotGroup()
	dead := spotNode("b", ng, b.NotReady(), b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule), func(n *corev1.Node) {
		n.CreationTimestamp = metav1.NewTime(planNow.Add(-3 * time.Hour))
	})
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{spotNode("a", ng, notice), dead},
		Pods: []*corev1.Pod{app("w", "a", "1500m")}, LaunchGrace: scaleup.DefaultLaunchGrace})
	if d, ok := got["a"]; !ok || len(d.Launch) != 1 {
		t.Errorf("disruption of a: %+v (%v), want a replacement launched (b is dead)", d, ok)
	}
}

// TestDriftIsPacedByItsBudget: three nodes drifted (a template label
// changed); a budget of one for Drifted replaces one at a time, and a
// budget of 0 in an active window none; interruption ignores budgets.
func TestDriftIsPacedByItsBudget(t *testing.T) {
	launchedWith := spotGroup()
	one := intstr.FromInt32(1)
	drifted := spotGroup(b.TemplateLabel("tier", "gold"), func(ng *v1alpha1.NodeGroup) {
		all := intstr.FromString("100%")
		ng.Spec.Disruption.Budget = &all
		ng.Spec.Disruption.Budgets = []v1alpha1.DisruptionBudget{{Nodes: one, Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}}}
	})
	drifted.UID = launchedWith.UID
	nodes := []*corev1.Node{spotNode("a", launchedWith), spotNode("b", launchedWith), spotNode("c", launchedWith)}
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted}, Nodes: nodes})
	if len(got) != 1 || got["a"].Reason != v1alpha1.ReasonDrifted {
		t.Fatalf("disruptions %+v, want node a only (one at a time)", got)
	}
	if blocked["b"] != string(scaledown.ReasonBudget) || blocked["c"] != string(scaledown.ReasonBudget) {
		t.Errorf("blocked %v, want b and c held by the Drifted budget", blocked)
	}
	zero := intstr.FromInt32(0)
	drifted.Spec.Disruption.Budgets = []v1alpha1.DisruptionBudget{{Nodes: zero, Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted, v1alpha1.ReasonInterrupted},
		Schedule: "@daily", Duration: &metav1.Duration{Duration: 24 * time.Hour}}}
	nodes = append(nodes, spotNode("d", launchedWith, notice))
	got, _ = disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted}, Nodes: nodes})
	if len(got) != 1 || got["d"].Reason != v1alpha1.ReasonInterrupted {
		t.Errorf("disruptions %+v under a budget of 0: want only the interrupted node d", got)
	}
}

// TestTheOldestExpiredNodeGoesFirst: with room in the budget for one,
// the oldest expired node goes first, whatever the names.
func TestTheOldestExpiredNodeGoesFirst(t *testing.T) {
	one := intstr.FromInt32(1)
	ng := spotGroup(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Hour}
		ng.Spec.Disruption.Budget = &one
	})
	launched := func(ago time.Duration) b.NodeOption {
		return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(planNow.Add(-ago)) }
	}
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng},
		Nodes: []*corev1.Node{spotNode("a", ng, launched(2*time.Hour)), spotNode("b", ng, launched(5*time.Hour)), spotNode("c", ng, launched(3*time.Hour))}})
	if len(got) != 1 || got["b"].Reason != v1alpha1.ReasonExpired {
		t.Errorf("disruptions %+v, want b only (launched 5 hours ago)", got)
	}
	if blocked["a"] != string(scaledown.ReasonBudget) || blocked["c"] != string(scaledown.ReasonBudget) {
		t.Errorf("blocked %v, want a and c held by the budget", blocked)
	}
}

// TestDriftKeepsTheDrainRules: a drifted node with a bare pod stays; an
// interrupted one goes anyway (the cloud takes it).
func TestDriftKeepsTheDrainRules(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	bare := func(node string) *corev1.Pod { return b.Pod("bare-"+node, b.NodeName(node), b.CPU("100m")) }
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("a", launchedWith), spotNode("i", launchedWith, notice), spotNode("z", launchedWith)},
		Pods:  []*corev1.Pod{bare("a"), bare("i")}})
	if _, ok := got["a"]; ok || blocked["a"] != "NotReplicated" {
		t.Errorf("drifted node a with a bare pod: disrupted %v, blocked %q; want it kept (NotReplicated)", ok, blocked["a"])
	}
	if _, ok := got["i"]; !ok {
		t.Error("the interrupted node with a bare pod is not disrupted")
	}
}

// TestANodeItsOwnerOptedOutIsNeitherDriftedNorExpiredAway: the group's
// template changed, so every node drifted; a is annotated do-not-disrupt
// and l labelled scale-down-disabled, and both stay (NodeDoNotDisrupt);
// i is annotated too but interrupted, and goes (the cloud takes it).
func TestANodeItsOwnerOptedOutIsNeitherDriftedNorExpiredAway(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	optOut := b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true")
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("a", launchedWith, optOut), spotNode("l", launchedWith, b.NodeLabels(v1alpha1.LabelScaleDownDisabled, "true")),
			spotNode("i", launchedWith, optOut, notice), spotNode("z", launchedWith)}})
	for _, name := range []string{"a", "l"} {
		if _, ok := got[name]; ok || blocked[name] != string(scaledown.ReasonNodeDoNotDisrupt) {
			t.Errorf("drifted node %s opted out: disrupted %v, blocked %q; want it kept (NodeDoNotDisrupt)", name, ok, blocked[name])
		}
	}
	if _, ok := got["i"]; !ok {
		t.Error("the interrupted node annotated do-not-disrupt is not disrupted")
	}
	if _, ok := got["z"]; !ok {
		t.Error("the drifted node without an opt-out is not disrupted")
	}
}

// TestADriftedNodeOfAGroupAtItsMinSizeIsReplacedFirst: the group keeps
// minSize 2 and has two nodes, both drifted and running a pod (an empty
// one would go first); a's pod fits on z, but a drained at once would take the group below its minSize until the
// provisioner noticed: a node is launched for it first.
func TestADriftedNodeOfAGroupAtItsMinSizeIsReplacedFirst(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	drifted.Spec.MinSize = 2
	one := intstr.FromInt32(1)
	drifted.Spec.Disruption.Budget = &one
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("a", launchedWith, aged(48*time.Hour)), spotNode("z", launchedWith, aged(time.Hour))},
		Pods:  []*corev1.Pod{app("wa", "a", "500m"), app("wz", "z", "100m")}})
	d, ok := got["a"]
	if !ok || len(d.Launch) != 1 {
		t.Errorf("drifted node a of a group at its minSize: disruption %+v (%v, blocked %q); want one node launched first", d, ok, blocked["a"])
	}
}

// TestAReplacementLaunchesNothingForAnotherGroupsMinSize: as above, while
// another group is below its minSize (the provisioner's to bring up): the
// drifted node's replacement is its own group's node only.
func TestAReplacementLaunchesNothingForAnotherGroupsMinSize(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	drifted.Spec.MinSize = 2
	one := intstr.FromInt32(1)
	drifted.Spec.Disruption.Budget = &one
	other := group("other", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.MinSize = 2
		b.InstanceType("o-2", "2", "8Gi", b.OnDemand("zone-a", "0.50"))(ng)
	})
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted, other},
		Nodes: []*corev1.Node{spotNode("a", launchedWith, aged(48*time.Hour)), spotNode("z", launchedWith, aged(time.Hour))},
		Pods:  []*corev1.Pod{app("wa", "a", "500m"), app("wz", "z", "100m")}})
	d, ok := got["a"]
	if !ok || len(d.Launch) != 1 || d.Launch[0].NodeGroup != drifted.Name {
		t.Errorf("drifted node a: disruption %+v (%v, blocked %q); want one node of its own group launched first, none of group other", d, ok, blocked["a"])
	}
}

// TestADriftedNodeWhoseDrainWasGivenUpWaitsItsCooldown: every node
// drifted; the drain of a was given up a moment ago (its drain timed out):
// it stays for the cooldown (RecentlyGivenUp) rather than being tainted
// again at once, while z drifts away; i, given up too, is interrupted and
// goes (the cloud takes it).
func TestADriftedNodeWhoseDrainWasGivenUpWaitsItsCooldown(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	all := intstr.FromString("100%")
	drifted.Spec.Disruption.Budget = &all
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes:   []*corev1.Node{spotNode("a", launchedWith), spotNode("i", launchedWith, notice), spotNode("z", launchedWith)},
		Cooling: map[string]string{"a": "berth gave up draining node a a moment ago", "i": "berth gave up draining node i a moment ago"}})
	if _, ok := got["a"]; ok || blocked["a"] != string(scaledown.ReasonRecentlyGivenUp) {
		t.Errorf("drifted node a given up a moment ago: disrupted %v, blocked %q; want it kept (RecentlyGivenUp)", ok, blocked["a"])
	}
	for _, name := range []string{"i", "z"} {
		if _, ok := got[name]; !ok {
			t.Errorf("node %s not disrupted (blocked %q)", name, blocked[name])
		}
	}
}

// TestADriftedNodeOfAHeldGroupStays: no removal starts in a group held
// (its provider could not refresh it: its bounds are unknown), drift
// included; an interruption still goes (the cloud takes the node).
func TestADriftedNodeOfAHeldGroupStays(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	all := intstr.FromString("100%")
	drifted.Spec.Disruption.Budget = &all
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("a", launchedWith), spotNode("i", launchedWith, notice), spotNode("z", launchedWith)},
		Held:  map[string]string{drifted.Name: "its provider could not refresh it this round"}})
	for _, name := range []string{"a", "z"} {
		if _, ok := got[name]; ok || blocked[name] != string(scaledown.ReasonGroupHeld) {
			t.Errorf("drifted node %s of a held group: disrupted %v, blocked %q; want it kept (NodeGroupHeld)", name, ok, blocked[name])
		}
	}
	if _, ok := got["i"]; !ok {
		t.Errorf("the interrupted node of a held group is not disrupted (blocked %q)", blocked["i"])
	}
}

// TestAnInterruptedNodesPodsKeepTheirRoomWhenOneWouldBlockADrain: x is
// interrupted and holds a bare pod (no controller: it would block a
// drain, and it does not come back) and a Deployment's 3-cpu pod. The
// cloud takes x anyway, so the 3-cpu pod needs a home: y's room holds it
// (no launch), and z, whose pod would need the same room, stays.
func TestAnInterruptedNodesPodsKeepTheirRoomWhenOneWouldBlockADrain(t *testing.T) {
	g := group("g")
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g},
		Nodes: []*corev1.Node{node("x", g, b.NodeTaint(v1alpha1.TaintInterruption, "provider", corev1.TaintEffectNoSchedule)),
			node("y", g, b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true")), node("z", g)},
		Pods: []*corev1.Pod{b.Pod("bare", b.NodeName("x"), b.CPU("100m"), b.Phase(corev1.PodRunning)), app("x1", "x", "3000m"),
			app("y1", "y", "500m"), app("z1", "z", "3000m")}}
	got, blocked := disruptions(t, in)
	if d, ok := got["x"]; !ok || d.Reason != v1alpha1.ReasonInterrupted || len(d.Launch) != 0 {
		t.Errorf("disruption of x: %+v (%v), want Interrupted, drained with no launch (its pod fits on y)", d, ok)
	}
	if blocked["z"] != string(scaledown.ReasonNoHome) {
		t.Errorf("z: %q, want NoHome: y's room is x's pod's (blocked: %v)", blocked["z"], blocked)
	}
}

// TestRepairInSmallGroups (Karpenter's node health suite rounds its 20 %
// up): in a group of three with repair on, the node Ready once and
// NotReady for an hour is repaired (a share of 33 % held every repair in
// groups of up to four); with two of three down, both stay and say
// RepairHeld; a node launched 12 minutes ago that was never Ready is left
// to the launch timeout (repair drained it before its max provision time).
func TestRepairInSmallGroups(t *testing.T) {
	ng := spotGroup(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.Repair = &v1alpha1.Repair{}
		all := intstr.FromString("100%")
		ng.Spec.Disruption.Budget = &all
	})
	downFor := func(d time.Duration) b.NodeOption {
		return func(n *corev1.Node) {
			n.CreationTimestamp = metav1.NewTime(planNow.Add(-d - time.Hour))
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(planNow.Add(-d))}}
		}
	}
	neverReady := func(n *corev1.Node) {
		delete(n.Labels, v1alpha1.LabelInitialized)
		n.CreationTimestamp = metav1.NewTime(planNow.Add(-12 * time.Minute))
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(planNow.Add(-12 * time.Minute))}}
	}
	in := func(nodes ...*corev1.Node) scaledown.Input {
		return scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, LaunchGrace: 15 * time.Minute}
	}
	got, _ := disruptions(t, in(spotNode("a", ng), spotNode("b", ng), spotNode("dead", ng, downFor(time.Hour))))
	if got["dead"].Reason != v1alpha1.ReasonUnhealthy {
		t.Errorf("one of three down for an hour: disruptions %+v, want dead repaired", got)
	}
	got, blocked := disruptions(t, in(spotNode("a", ng), spotNode("dead-1", ng, downFor(time.Hour)), spotNode("dead-2", ng, downFor(time.Hour))))
	if len(got) != 0 || blocked["dead-1"] != string(scaledown.ReasonRepairHeld) || blocked["dead-2"] != string(scaledown.ReasonRepairHeld) {
		t.Errorf("two of three down: disruptions %+v, blocked %v; want none, both RepairHeld", got, blocked)
	}
	got, _ = disruptions(t, in(spotNode("a", ng), spotNode("b", ng), spotNode("booting", ng, neverReady)))
	if _, ok := got["booting"]; ok {
		t.Errorf("a node never Ready 12 minutes after its launch: disruptions %+v, want it left to the launch timeout", got)
	}
}

// TestAPartitionRepairsNoGroupOfOne: five groups of one node each, repair
// on. One node NotReady for an hour is repaired (its group's share is one
// of one, and one of the cluster's five is within 20 %). All five
// NotReady for an hour (the API server lost its kubelets): none is
// repaired, each says RepairHeld naming the cluster; each group's own
// share (one of one) would have repaired them all.
func TestAPartitionRepairsNoGroupOfOne(t *testing.T) {
	downFor := func(d time.Duration) b.NodeOption {
		return func(n *corev1.Node) {
			n.CreationTimestamp = metav1.NewTime(planNow.Add(-d - time.Hour))
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(planNow.Add(-d))}}
		}
	}
	var groups []*v1alpha1.NodeGroup
	for i := range 5 {
		groups = append(groups, group(fmt.Sprintf("one-%d", i), func(ng *v1alpha1.NodeGroup) {
			ng.Spec.InstanceTypes = nil
			b.InstanceType("m-2", "2", "8Gi", b.Spot("zone-a", "0.03"), b.OnDemand("zone-a", "0.10"))(ng)
			ng.Spec.Disruption.Repair = &v1alpha1.Repair{}
		}))
	}
	in := func(down int) scaledown.Input {
		var nodes []*corev1.Node
		for i, g := range groups {
			var opts []b.NodeOption
			if i < down {
				opts = append(opts, downFor(time.Hour))
			}
			nodes = append(nodes, spotNode(fmt.Sprintf("n-%d", i), g, opts...))
		}
		return scaledown.Input{NodeGroups: groups, Nodes: nodes, LaunchGrace: 15 * time.Minute}
	}
	got, _ := disruptions(t, in(1))
	if got["n-0"].Reason != v1alpha1.ReasonUnhealthy {
		t.Errorf("one of five down for an hour: disruptions %+v, want n-0 repaired", got)
	}
	got, blocked := disruptions(t, in(5))
	if len(got) != 0 {
		t.Errorf("all five down for an hour: disruptions %+v, want none (a partition is not a repair)", got)
	}
	for i := range 5 {
		if name := fmt.Sprintf("n-%d", i); blocked[name] != string(scaledown.ReasonRepairHeld) {
			t.Errorf("%s: %q, want RepairHeld", name, blocked[name])
		}
	}
}

// TestNodesThePlanTakesOutAreNoHomeForOthersPods (Karpenter's drift
// suite: a node being disrupted is no destination): two drifted nodes go
// in one round; the first one's pod fits on the current node, the
// second one's fits nowhere but on the first, which is leaving: a node is
// launched for it (it was planned onto the leaving node, and waited for a
// node after the drain). The same for a node whose replacement is
// booting: its pods fill that replacement.
func TestNodesThePlanTakesOutAreNoHomeForOthersPods(t *testing.T) {
	all := intstr.FromString("100%")
	launchedWith, drifted := driftGroups(&all)
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("d1", launchedWith), spotNode("d2", launchedWith), spotNode("e", drifted)},
		Pods:  []*corev1.Pod{app("p1", "d1", "500m"), app("p2", "d2", "1500m"), app("pe", "e", "1000m")}})
	if launched := len(got["d1"].Launch) + len(got["d2"].Launch); len(got) != 2 || launched != 1 {
		t.Errorf("disruptions %+v, want d1 and d2 with one node launched between them", got)
	}
	replacing := spotGroup(b.TemplateLabel("tier", "gold"))
	replacing.UID = launchedWith.UID
	got, _ = disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{replacing},
		Nodes: []*corev1.Node{spotNode("d", launchedWith), spotNode("x", replacing, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "n")), spotNode("n", replacing, b.NotReady())},
		Pods:  []*corev1.Pod{app("pd", "d", "1500m"), app("px", "x", "1500m")}})
	if d, ok := got["d"]; !ok || len(d.Launch) != 1 {
		t.Errorf("disruption of d: %+v (%v), want a node launched (x's replacement n takes x's pod)", d, ok)
	}
}

// TestANodeComingUpIsNotDriftedAway (Karpenter: candidates not
// initialized, or nominated, are not disrupted): a node of the old
// template still booting, and an old node with a pod nominated to it,
// are not replaced for drift (both were: the booting one deleted before
// it was up).
func TestANodeComingUpIsNotDriftedAway(t *testing.T) {
	all := intstr.FromString("100%")
	launchedWith, drifted := driftGroups(&all)
	boot := spotNode("boot", launchedWith, b.NotReady(), func(n *corev1.Node) {
		n.CreationTimestamp = metav1.NewTime(planNow.Add(-time.Minute))
		delete(n.Labels, v1alpha1.LabelInitialized)
	})
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted}, Nodes: []*corev1.Node{boot, spotNode("e", drifted)}, LaunchGrace: 15 * time.Minute})
	if len(got) != 0 {
		t.Errorf("disruptions %+v, want the booting node left alone", got)
	}
	up := spotNode("up", launchedWith)
	waiting := b.Pod("waiting", b.CPU("1500m"), b.OwnedBy("ReplicaSet", "web"))
	waiting.Status.NominatedNodeName = "up"
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted}, Nodes: []*corev1.Node{up}, Nominated: []*corev1.Pod{waiting}})
	if len(got) != 0 || blocked["up"] != string(scaledown.ReasonNominated) {
		t.Errorf("disruptions %+v, blocked %v; want the node a pod is nominated to kept (PodNominated)", got, blocked)
	}
}

// TestAPercentageBudgetIsOfTheNodesUp (Karpenter: nodes not initialized
// are not part of the disruption count): ten drifted nodes under a budget
// of 10 %, one already replaced by a node still booting: no second node
// is disrupted (the booting replacement made eleven, and 10 % of eleven,
// rounded up, two).
func TestAPercentageBudgetIsOfTheNodesUp(t *testing.T) {
	ten := intstr.FromString("10%")
	launchedWith, drifted := driftGroups(&ten)
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 10 {
		name := fmt.Sprintf("n%d", i)
		var opts []b.NodeOption
		if i == 0 {
			opts = append(opts, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "repl"))
		}
		nodes = append(nodes, spotNode(name, launchedWith, opts...))
		pods = append(pods, app("p"+name, name, "1500m"))
	}
	nodes = append(nodes, spotNode("repl", drifted, b.NotReady(), func(n *corev1.Node) {
		n.CreationTimestamp = metav1.NewTime(planNow.Add(-time.Minute))
		delete(n.Labels, v1alpha1.LabelInitialized)
	}))
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted}, Nodes: nodes, Pods: pods, LaunchGrace: 15 * time.Minute})
	if len(got) != 0 {
		t.Errorf("disruptions %+v, want none while n0's replacement boots (10 %% of ten nodes up is one)", got)
	}
}

// TestABudgetOfACountWrittenAsAStringIsACount (Karpenter's budgets are
// strings: nodes: "1"): three drifted nodes under a Drifted budget of
// "1" are replaced one at a time, as with 1 (the string was read as a
// percentage that did not parse, 0, and none was replaced).
func TestABudgetOfACountWrittenAsAStringIsACount(t *testing.T) {
	all := intstr.FromString("100%")
	launchedWith, drifted := driftGroups(&all)
	drifted.Spec.Disruption.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromString("1"), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}}}
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("a", launchedWith), spotNode("b", launchedWith), spotNode("c", launchedWith)}})
	if len(got) != 1 {
		t.Errorf("disruptions %+v, want one node (a budget of \"1\")", got)
	}
}

// TestADriftedNodeOfAGroupAtItsMinSizeIsReplacedWhileAnotherDrains: the
// group keeps minSize 2 and has three nodes: x is being drained (an
// earlier removal, berth's disrupted taint), a is drifted, z is current;
// its budget allows 2 at once. a drained at once would take the group to
// one node once x is gone: a node is launched for it first (x, still
// there, does not count as staying).
func TestADriftedNodeOfAGroupAtItsMinSizeIsReplacedWhileAnotherDrains(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	drifted.Spec.MinSize = 2
	two := intstr.FromInt32(2)
	drifted.Spec.Disruption.Budget = &two
	x := spotNode("x", drifted, aged(72*time.Hour), b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule))
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{x, spotNode("a", launchedWith, aged(48*time.Hour)), spotNode("z", drifted, aged(time.Hour))},
		Pods:  []*corev1.Pod{app("wa", "a", "500m")}})
	d, ok := got["a"]
	if !ok || len(d.Launch) != 1 {
		t.Errorf("drifted node a of a group at its minSize (x draining): disruption %+v (%v, blocked %q); want one node launched first", d, ok, blocked["a"])
	}
}
