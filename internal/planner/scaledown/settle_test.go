package scaledown_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// waiting is a pod the scheduler found no node for.
func waiting(name, cpu string, opts ...b.PodOption) *corev1.Pod {
	p := b.Pod(name, append([]b.PodOption{b.CPU(cpu), b.OwnedBy("ReplicaSet", "web"), b.Phase(corev1.PodPending)}, opts...)...)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	return p
}

// TestPodsThatNeedAHome: pods that wait for a node, and pods still on a
// node being drained, take their room on the nodes that stay before any
// removal is tried; a waiting pod that fits nowhere stops nothing.
func TestPodsThatNeedAHome(t *testing.T) {
	g := group("g")
	two := intstr.FromInt32(2)
	g2 := group("g", func(ng *v1alpha1.NodeGroup) { ng.Spec.Disruption.Budget = &two })
	drained := b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)
	tests := []struct {
		name         string
		in           scaledown.Input
		want         outcome
		wantUnplaced []string
	}{
		{
			name: "a pending pod that no node can take (a selector nothing has) does not keep an empty node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g)},
				Pending: []*corev1.Pod{waiting("stuck", "1", b.NodeSelector("disk", "none-has-it"))}},
			want:         outcome{removed: []string{"a"}, blocked: map[string]string{}},
			wantUnplaced: []string{"default/stuck"},
		},
		{
			name: "a pending pod too large for any node does not keep an empty node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g)},
				Pending: []*corev1.Pod{waiting("huge", "64")}},
			want:         outcome{removed: []string{"a"}, blocked: map[string]string{}},
			wantUnplaced: []string{"default/huge"},
		},
		{
			name: "an empty node that a pending pod fits on stays for it",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)},
				Pods: []*corev1.Pod{app("busy", "a", "3500m")}, Pending: []*corev1.Pod{waiting("coming", "3")}},
			want: outcome{blocked: map[string]string{"a": "NoHome default/busy", "b": "NoHome default/coming"}},
		},
		{
			name: "the node the pods of a draining node will move to is not removed under them",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g2}, Nodes: []*corev1.Node{node("a", g2), node("d", g2, drained)},
				Pods: []*corev1.Pod{app("moving", "d", "3")}},
			want: outcome{blocked: map[string]string{"a": "NoHome default/moving"}},
		},
		{
			name: "a draining node's pod that fits nowhere keeps no other node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g2}, Nodes: []*corev1.Node{node("a", g2),
				b.Node("d", "8", "32Gi", b.LaunchedBy(g2), drained)},
				Pods: []*corev1.Pod{app("giant", "d", "7")}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{}},
		},
		{
			name: "a held group removes nothing; another group goes on",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g, group("other")}, Nodes: []*corev1.Node{node("a", g), node("z", group("other"))},
				Held: map[string]string{"g": "berth launched a node for pending pod default/x"}},
			want: outcome{removed: []string{"z"}, blocked: map[string]string{"a": "NodeGroupHeld"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.in)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			plan, err := scaledown.Run(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var unplaced []string
			for _, u := range plan.Unplaced {
				unplaced = append(unplaced, u.String())
			}
			if diff := cmp.Diff(tt.wantUnplaced, unplaced); diff != "" {
				t.Errorf("unplaced (-want +got):\n%s", diff)
			}
			for _, r := range plan.Remove {
				for _, m := range r.Evict {
					for _, p := range tt.in.Pending {
						if p.Name == m.Pod.Name {
							t.Errorf("removal of %s evicts pending pod %s", r.Node, m.Pod)
						}
					}
				}
			}
		})
	}
}

// TestRecheckCountsWhatNeedsAHome: a drain goes on only while its pods
// still have a home after the pods that wait for a node, and the pods of
// the other drains, took their room.
func TestRecheckCountsWhatNeedsAHome(t *testing.T) {
	g := group("re")
	drained := b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)
	base := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g, drained), node("b", g)},
		Pods: []*corev1.Pod{app("w", "a", "2")}}
	if bl, err := scaledown.Recheck(base, "a"); err != nil || bl != nil {
		t.Fatalf("drain of a with room on b: %+v %v, want it to go on", bl, err)
	}
	withPending := base
	withPending.Pending = []*corev1.Pod{waiting("coming", "3")}
	if bl, err := scaledown.Recheck(withPending, "a"); err != nil || bl == nil || bl.Reason != scaledown.ReasonNoHome {
		t.Errorf("drain of a after a pending pod took b's room: %+v %v, want NoHome", bl, err)
	}
	withOtherDrain := base
	withOtherDrain.Nodes = append(withOtherDrain.Nodes, node("c", g, drained))
	withOtherDrain.Pods = append(withOtherDrain.Pods, app("x", "c", "1"))
	if bl, err := scaledown.Recheck(withOtherDrain, "c"); err != nil || bl != nil {
		t.Errorf("drain of c (a's pod and c's fit on b together): %+v %v, want it to go on", bl, err)
	}
	withOtherDrain.Pods[len(withOtherDrain.Pods)-1] = app("x", "c", "3")
	if bl, err := scaledown.Recheck(withOtherDrain, "c"); err != nil || bl == nil || bl.Reason != scaledown.ReasonNoHome {
		t.Errorf("drain of c after a's pod took b's room: %+v %v, want NoHome", bl, err)
	}
}

// TestPodsThatAreGoingOrCannotComeBack: a pod terminating long past its
// grace period does not keep its node, but still fills the node it is on
// (kube-scheduler counts it there until it is gone: a finalizer may hold
// it for ever); a pod whose ReplicaSet is gone keeps its node (it would
// not come back).
func TestPodsThatAreGoingOrCannotComeBack(t *testing.T) {
	g := group("g")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	stuck := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Hour)} }
	tests := []struct {
		name string
		in   scaledown.Input
		want outcome
	}{
		{
			name: "a bare pod stuck terminating for an hour does not keep its node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g)}, Now: now,
				Pods: []*corev1.Pod{b.Pod("stuck", b.NodeName("a"), b.CPU("1"), stuck)}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{}},
		},
		{
			name: "a pod stuck terminating still fills the node others would move to",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g, b.NodeLabels(v1alpha1.LabelScaleDownDisabled, "true"))}, Now: now,
				Pods: []*corev1.Pod{app("w", "a", "3"), app("stuck", "b", "3", stuck)}},
			want: outcome{blocked: map[string]string{"a": "NoHome default/w", "b": "NodeDoNotDisrupt"}},
		},
		{
			name: "a pod stuck terminating leaves the room it does not hold",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g, b.NodeLabels(v1alpha1.LabelScaleDownDisabled, "true"))}, Now: now,
				Pods: []*corev1.Pod{app("w", "a", "1"), app("stuck", "b", "2", stuck)}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{"b": "NodeDoNotDisrupt"}},
		},
		{
			name: "a pod whose ReplicaSet is gone keeps its node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)}, Now: now,
				Pods: []*corev1.Pod{app("orphan", "a", "1")}, Controllers: map[types.UID]bool{"uid-other": true}},
			want: outcome{removed: []string{"b"}, blocked: map[string]string{"a": "ControllerNotFound default/orphan"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, run(t, tt.in), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestADeletedGroupsNodesGo: a NodeGroup being deleted (deletionPolicy
// Drain) has its nodes removed whatever its minSize, consolidation policy
// or holds, and even when their pods fit nowhere else (they wait for
// another group's node), at its budget's pace; drain rules still apply.
// With Orphan nothing is removed.
func TestADeletedGroupsNodesGo(t *testing.T) {
	one := intstr.FromInt32(1)
	deleted := func(policy v1alpha1.DeletionPolicy) *v1alpha1.NodeGroup {
		return group("gone", func(ng *v1alpha1.NodeGroup) {
			ng.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			ng.Spec.MinSize = 3
			ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever
			ng.Spec.Disruption.Budget = &one
			ng.Spec.DeletionPolicy = policy
		})
	}
	drain := deleted(v1alpha1.DeletionDrain)
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{drain}, Nodes: []*corev1.Node{node("a", drain), node("b", drain), node("c", drain)},
		Pods: []*corev1.Pod{app("big", "a", "3500m"), app("big2", "b", "3500m"), b.Pod("bare", b.NodeName("c"), b.CPU("1"))},
		Held: map[string]string{"gone": "held"}}
	plan, err := scaledown.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Remove) != 1 || plan.Remove[0].Reason != scaledown.RemovalNodeGroupDeleted || len(plan.Remove[0].Evict) != 1 {
		t.Fatalf("removals %+v, want one node (the budget) of the deleted group, its pod evicted though it fits nowhere", plan.Remove)
	}
	reasons := map[string]string{}
	for _, bl := range plan.Blocked {
		reasons[bl.Node] = string(bl.Reason)
	}
	if reasons["c"] != "NotReplicated" {
		t.Errorf("node c with a bare pod: %q, want NotReplicated (drain rules still apply)", reasons["c"])
	}
	orphan := deleted(v1alpha1.DeletionOrphan)
	in.NodeGroups = []*v1alpha1.NodeGroup{orphan}
	in.Nodes = []*corev1.Node{node("a", orphan), node("b", orphan)}
	if got := run(t, in); len(got.removed) != 0 {
		t.Errorf("an Orphan group being deleted removed %v", got.removed)
	}
	// Nor are its empty nodes consolidated while it goes (the nodes are the
	// user's from the deletion).
	consolidating := orphan.DeepCopy()
	consolidating.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationWhenEmptyOrUnderutilized
	consolidating.Spec.MinSize = 0
	in = scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{consolidating}, Nodes: []*corev1.Node{node("a", consolidating), node("b", consolidating)}}
	if got := run(t, in); len(got.removed) != 0 {
		t.Errorf("an Orphan group being deleted had its empty nodes %v consolidated", got.removed)
	}
}

// TestACoolingNodeTakesNoShareOfTheBudget: of two empty nodes of a group
// whose budget is one, the one whose drain was just given up is not a
// candidate: the other is removed.
func TestACoolingNodeTakesNoShareOfTheBudget(t *testing.T) {
	one := intstr.FromInt32(1)
	g := group("g", func(ng *v1alpha1.NodeGroup) { ng.Spec.Disruption.Budget = &one })
	got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)},
		Cooling: map[string]string{"a": "given up a moment ago"}})
	want := outcome{removed: []string{"b"}, blocked: map[string]string{"a": "RecentlyGivenUp"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestAPodNominatedToANodeKeepsItUntilItsDrainStarts: node a waits for its
// replacement ra (a is not tainted meanwhile: pods may still land there).
// kube-scheduler preempted one of a's pods for a 3.5-cpu pod and
// nominated it to a; ra is now Ready. The check before a's drain keeps a
// (PodNominated): draining it would kill the victim for nothing, and the
// preemptor, which fits on no other node, would wait for one again.
// Karpenter re-validates a decision for this too. Once a is tainted (its
// drain under way) no pod binds there, and the drain goes on.
func TestAPodNominatedToANodeKeepsItUntilItsDrainStarts(t *testing.T) {
	g := group("re")
	preemptor := b.Pod("urgent", b.CPU("3500m"), b.OwnedBy("ReplicaSet", "urgent"), b.Phase(corev1.PodPending),
		func(p *corev1.Pod) { p.Status.NominatedNodeName = "a" })
	in := func(a *corev1.Node) scaledown.Input {
		return scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{a, node("ra", g)},
			Pods: []*corev1.Pod{app("web-a", "a", "500m"), app("web-ra", "ra", "1")}, Nominated: []*corev1.Pod{preemptor}, Now: planNow}
	}
	replaced := node("a", g, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "ra"))
	if bl, err := scaledown.Recheck(in(replaced), "a"); err != nil || bl == nil || bl.Reason != scaledown.ReasonNominated {
		t.Errorf("check before a's drain, pod default/urgent nominated to it: %+v %v; want it kept (PodNominated)", bl, err)
	}
	draining := node("a", g, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "ra"), b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule))
	if bl, err := scaledown.Recheck(in(draining), "a"); err != nil || bl != nil {
		t.Errorf("check of a's drain under way, pod nominated before the taint: %+v %v; want the drain to go on", bl, err)
	}
}

// TestAnEvictedPodIsCountedOnceByTheCheckOfItsDrain: node a drains; its
// 3-cpu pod was evicted and shuts down, and its replacement waits for a
// node. Node b (4 cpu) has room for one such pod. A ReplicaSet's pod is made
// again at once: the replacement takes b's room and the pod shutting down
// needs no second home, so the drain goes on (it stopped before, the pod
// counted twice). A StatefulSet makes its pod again only once it is gone:
// it needs b's room itself, and with another pod waiting for it the drain
// stops.
func TestAnEvictedPodIsCountedOnceByTheCheckOfItsDrain(t *testing.T) {
	g := group("re")
	drained := b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)
	shuttingDown := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: planNow.Add(-10 * time.Second)} }
	nodes := []*corev1.Node{node("a", g, drained), node("b", g)}
	rs := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: nodes, Now: planNow,
		Pods: []*corev1.Pod{app("web-old", "a", "3", shuttingDown)}, Pending: []*corev1.Pod{waiting("web-new", "3")}}
	if bl, err := scaledown.Recheck(rs, "a"); err != nil || bl != nil {
		t.Errorf("drain of a, its ReplicaSet's pod evicted and made again: %+v %v, want it to go on", bl, err)
	}
	sts := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: nodes, Now: planNow,
		Pods:    []*corev1.Pod{b.Pod("db-0", b.NodeName("a"), b.CPU("3"), b.OwnedBy("StatefulSet", "db"), b.Phase(corev1.PodRunning), shuttingDown)},
		Pending: []*corev1.Pod{waiting("other", "3")}}
	if bl, err := scaledown.Recheck(sts, "a"); err != nil || bl == nil || bl.Reason != scaledown.ReasonNoHome {
		t.Errorf("drain of a, its StatefulSet's pod evicted (made again once gone) and another pod taking b's room: %+v %v, want NoHome", bl, err)
	}
}
