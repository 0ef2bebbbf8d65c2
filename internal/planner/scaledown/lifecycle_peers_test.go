package scaledown_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestADriftFreezeDoesNotStopExpiry: the group froze drift replacements
// (a Drifted budget of 0, as users roll a new template out by hand) and
// expires nodes after an hour. Node a was launched two days ago with the
// old template: it has expired, and the Expired budget allows it, so it
// is replaced as Expired, as Karpenter expires it whatever the drift
// budget (expiration is its own controller).
func TestADriftFreezeDoesNotStopExpiry(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	drifted.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Hour}
	drifted.Spec.Disruption.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromInt32(0), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}}}
	twoDaysOld := func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(planNow.Add(-48 * time.Hour)) }
	fresh := func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(planNow.Add(-time.Minute)) }
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("a", launchedWith, twoDaysOld), spotNode("z", drifted, fresh)}})
	if d, ok := got["a"]; !ok || d.Reason != v1alpha1.ReasonExpired {
		t.Errorf("node a, drifted and expired: disruption %+v (%v), blocked %q; want it replaced as Expired (its budget allows it)", d, ok, blocked["a"])
	}
}

// TestAnUnhealthyNodeWithARebalanceRecommendationIsRepaired: repair and
// rebalance are on; node dead has been NotReady for an hour and carries a
// rebalance recommendation (it stays on the node). It is repaired, as
// Karpenter's node health does: taken as drift, it would wait for the
// window, and its own NotReady would count against the Drifted budget (10 %
// of three: one), so it would never go.
func TestAnUnhealthyNodeWithARebalanceRecommendationIsRepaired(t *testing.T) {
	ten := intstr.FromString("10%")
	ng := spotGroup(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.Repair = &v1alpha1.Repair{}
		ng.Spec.Disruption.Interruption = &v1alpha1.Interruption{Rebalance: true}
		ng.Spec.Disruption.Budget = &ten
	})
	dead := spotNode("dead", ng, b.NodeTaint("aws-node-termination-handler/rebalance-recommendation", "", corev1.TaintEffectPreferNoSchedule),
		func(n *corev1.Node) {
			n.CreationTimestamp = metav1.NewTime(planNow.Add(-3 * time.Hour))
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(planNow.Add(-time.Hour))}}
		})
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{spotNode("a", ng), spotNode("b", ng), dead},
		LaunchGrace: 15 * time.Minute})
	if d, ok := got["dead"]; !ok || d.Reason != v1alpha1.ReasonUnhealthy {
		t.Errorf("node NotReady for an hour with a rebalance recommendation: disruption %+v (%v), blocked %q; want it repaired (Unhealthy)", d, ok, blocked["dead"])
	}
}

// TestAnInterruptedNodeOfAGroupBeingDeletedIsNotHeldByItsBudget: the
// group is being deleted (deletionPolicy Drain) one node at a time; x is
// draining, and i gets a spot interruption notice. The cloud takes i in
// two minutes: its drain must start now (interruptions "count, never
// held"), as Karpenter's interruption controller deletes the NodeClaim
// whatever its NodePool is doing. Planned only as one of the deleted
// group's removals, under its budget, i would wait behind x, and its pods
// be killed at the deadline without an eviction.
func TestAnInterruptedNodeOfAGroupBeingDeletedIsNotHeldByItsBudget(t *testing.T) {
	one := intstr.FromInt32(1)
	ng := spotGroup(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.Budget = &one
		ng.DeletionTimestamp = &metav1.Time{Time: planNow.Add(-time.Minute)}
		ng.Spec.DeletionPolicy = v1alpha1.DeletionDrain
	})
	draining := spotNode("x", ng, b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule),
		b.NodeAnnotation(v1alpha1.AnnotationDisruptionStarted, planNow.Add(-time.Minute).Format(time.RFC3339)))
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Now: planNow,
		Nodes: []*corev1.Node{draining, spotNode("i", ng, notice), spotNode("y", ng)},
		Pods:  []*corev1.Pod{app("wx", "x", "500m"), app("wi", "i", "500m"), app("wy", "y", "500m")}})
	if err != nil {
		t.Fatal(err)
	}
	started := false
	for _, d := range plan.Disruptions {
		started = started || d.Node == "i"
	}
	for _, r := range plan.Remove {
		started = started || r.Node == "i"
	}
	if !started {
		t.Errorf("interrupted node i of a group being deleted: neither disrupted nor removed (blocked: %+v); want its drain started before its deadline", plan.Blocked)
	}
}

// TestAnOnDemandNodeUnderScheduledMaintenanceIsReplacedOnItsOffering:
// the group has one offering, on-demand m-2 in zone-a. Node a gets AWS
// Node Termination Handler's scheduled-maintenance taint (an EC2
// scheduled event: retirement, reboot): the on-demand capacity is not
// gone, and the replacement is of the same offering, as Karpenter marks an
// offering unavailable only on a spot interruption. Avoided, the group's
// only offering would leave the pod that fits nowhere else without a
// replacement (and scale-up without the group).
func TestAnOnDemandNodeUnderScheduledMaintenanceIsReplacedOnItsOffering(t *testing.T) {
	ng := group("od", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))(ng)
	})
	a := b.Node("a", "2", "8Gi", b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "m-2", v1alpha1.LabelZone, "zone-a",
		v1alpha1.LabelCapacityType, "on-demand"), b.NodeAnnotation(v1alpha1.AnnotationLaunchHash, ng.LaunchHash()),
		b.NodeTaint("aws-node-termination-handler/scheduled-maintenance", "", corev1.TaintEffectNoSchedule))
	got, _ := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{a},
		Pods: []*corev1.Pod{app("w", "a", "1500m")}})
	d, ok := got["a"]
	if !ok || d.Reason != v1alpha1.ReasonInterrupted {
		t.Fatalf("disruption of a: %+v (%v), want Interrupted", d, ok)
	}
	if len(d.Launch) != 1 || d.Launch[0].CapacityType != "on-demand" || d.Launch[0].InstanceType != "m-2" {
		t.Errorf("replacements %+v, want one on-demand m-2 (a maintenance event takes no capacity away)", d.Launch)
	}
}

// TestAnInterruptedNodeOfAGroupBeingDeletedIsReplacedElsewhere: the group
// of interrupted node i is being deleted; the pod that fits nowhere else
// gets a replacement in another group, never in the group being deleted
// (it would be drained again); in a group deleted with deletionPolicy
// Orphan the node is no longer berth's and is left alone.
func TestAnInterruptedNodeOfAGroupBeingDeletedIsReplacedElsewhere(t *testing.T) {
	for _, policy := range []v1alpha1.DeletionPolicy{v1alpha1.DeletionDrain, v1alpha1.DeletionOrphan} {
		ng := spotGroup(func(ng *v1alpha1.NodeGroup) {
			ng.DeletionTimestamp = &metav1.Time{Time: planNow.Add(-time.Minute)}
			ng.Spec.DeletionPolicy = policy
		})
		other := group("other", func(ng *v1alpha1.NodeGroup) {
			ng.Spec.InstanceTypes = nil
			b.InstanceType("o-2", "2", "8Gi", b.OnDemand("zone-a", "0.50"))(ng)
		})
		got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng, other},
			Nodes: []*corev1.Node{spotNode("i", ng, notice)},
			Pods:  []*corev1.Pod{app("wi", "i", "1500m")}})
		d, ok := got["i"]
		if policy == v1alpha1.DeletionOrphan {
			if ok {
				t.Errorf("Orphan: node i disrupted %+v; want it left alone (no longer berth's)", d)
			}
			continue
		}
		if !ok || len(d.Launch) != 1 {
			t.Errorf("%s: disruption %+v (%v, blocked %v); want one replacement", policy, d, ok, blocked)
		}
		for _, nn := range d.Launch {
			if nn.NodeGroup == ng.Name {
				t.Errorf("%s: replacement %s/%s/%s launched in node group %s, which is being deleted", policy, nn.Zone, nn.CapacityType, nn.InstanceType, nn.NodeGroup)
			}
		}
	}
}

// TestAnExpiredBudgetGoesToTheOldestNode: drift is frozen (a Drifted
// budget of 0) and one node may expire at a time: the only Expired slot
// goes to the oldest expired node (10 days), not to a younger one that
// is also drifted (3 days), which comes first among the drifted.
func TestAnExpiredBudgetGoesToTheOldestNode(t *testing.T) {
	launchedWith, drifted := driftGroups(nil)
	drifted.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: 24 * time.Hour}
	drifted.Spec.Disruption.Budgets = []v1alpha1.DisruptionBudget{
		{Nodes: intstr.FromInt32(0), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}},
		{Nodes: intstr.FromInt32(1), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonExpired}},
	}
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("old", drifted, aged(10*24*time.Hour)), spotNode("young", launchedWith, aged(3*24*time.Hour)),
			spotNode("z1", drifted), spotNode("z2", drifted), spotNode("z3", drifted)}})
	if _, ok := got["old"]; !ok {
		t.Errorf("expired node old (10 days) not disrupted (blocked %q) while young (3 days, drifted and expired) took the Expired budget: %v", blocked["old"], got["young"].Reason)
	}
}

// TestAnEmptyDriftedNodeGoesBeforeOneWithPods: a budget of one and two
// drifted nodes, old (ten days, one pod) and young (a day, empty). The
// empty one goes first, as Karpenter's drift tries its empty candidates
// first ("should drift empty nodes before non-empty nodes"): it goes at
// no cost, where old's turn would move its pod, possibly onto young, to
// move again at young's turn. Before, the older node went first.
func TestAnEmptyDriftedNodeGoesBeforeOneWithPods(t *testing.T) {
	one := intstr.FromInt32(1)
	launchedWith, drifted := driftGroups(&one)
	got, blocked := disruptions(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drifted},
		Nodes: []*corev1.Node{spotNode("old", launchedWith, aged(10*24*time.Hour)), spotNode("young", launchedWith, aged(24*time.Hour)),
			spotNode("z", drifted, aged(time.Hour))},
		Pods: []*corev1.Pod{app("w", "old", "500m")}})
	if _, ok := got["young"]; !ok || len(got) != 1 {
		t.Errorf("disrupted %v (young blocked: %q); want the empty drifted node young alone (a budget of one)", slices.Collect(maps.Keys(got)), blocked["young"])
	}
}
