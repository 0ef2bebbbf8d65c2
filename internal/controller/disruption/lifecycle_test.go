package disruption_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// patchNode changes a node on the API server.
func (f *fixture) patchNode(name string, change func(*corev1.Node)) {
	f.t.Helper()
	n := f.node(name)
	patch := client.MergeFrom(n.DeepCopy())
	change(n)
	if err := env.Client.Patch(context.Background(), n, patch); err != nil {
		f.t.Fatal(err)
	}
}

// updateGroup changes the fixture's node group on the API server.
func (f *fixture) updateGroup(change func(*v1alpha1.NodeGroup)) {
	f.t.Helper()
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(f.group), g); err != nil {
		f.t.Fatal(err)
	}
	change(g)
	if err := env.Client.Update(context.Background(), g); err != nil {
		f.t.Fatal(err)
	}
}

// removedWithin runs rounds until the node is gone.
func (f *fixture) removedWithin(name string, d time.Duration) {
	f.t.Helper()
	expect.Eventually(f.t, d, func(context.Context) (bool, string, error) {
		f.tolerantRun()
		return f.node(name) == nil, "node " + name + " still there", nil
	})
}

// tolerantRun runs a round; a conflict (KWOK wrote the node meanwhile) is
// what the next round retries, as the controller's loop does.
func (f *fixture) tolerantRun() *disruption.Result {
	f.t.Helper()
	for range 5 {
		res, err := f.ctrl.RunOnce(context.Background())
		if err == nil {
			return res
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			f.t.Fatal(err)
		}
	}
	f.t.Fatal("five rounds in a row hit a conflict")
	return nil
}

// TestAnInterruptedNodeIsReplacedAndDrainedBeforeItsDeadline: the only
// node, a spot one, gets an interruption notice with two minutes left;
// berth launches a replacement at once (not of the interrupted spot
// offering: the cloud takes its capacity back), drains the node, and
// removes it; the offering is avoided afterwards.
func TestAnInterruptedNodeIsReplacedAndDrainedBeforeItsDeadline(t *testing.T) {
	f := setup(t, "life-spot", 1, b.InstanceType("m-3", "3", "8Gi", b.OnDemand("zone-a", "0.20")))
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.InstanceTypes[0].Offerings = append(g.Spec.InstanceTypes[0].Offerings, b.Spot("zone-a", "0.03"))
	})
	f.deployment(1)
	offerings := state.NewOfferings(f.clk, time.Hour)
	f.ctrl.Offerings = offerings
	victim := f.nodes[0]
	deadline := f.clk.Now().Add(2 * time.Minute)
	f.patchNode(victim, func(n *corev1.Node) {
		n.Labels[v1alpha1.LabelCapacityType] = string(v1alpha1.CapacityTypeSpot)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Effect: corev1.TaintEffectNoSchedule})
		n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = deadline.UTC().Format(time.RFC3339)
	})
	res := f.run()
	if len(res.Replacements) != 1 || !contains(res.Started, victim) {
		t.Fatalf("round after the notice: replacements %v, started %v; want one replacement and %s drained at once", res.Replacements, res.Started, victim)
	}
	repl := f.node(res.Replacements[0])
	if repl == nil || repl.Labels[v1alpha1.LabelCapacityType] == string(v1alpha1.CapacityTypeSpot) {
		t.Errorf("replacement %+v, want one not on spot (the interrupted m-2 spot offering is avoided)", repl)
	}
	if u := offerings.Unavailable(); len(u) != 1 || u[0].InstanceType != "m-2" || u[0].CapacityType != string(v1alpha1.CapacityTypeSpot) {
		t.Errorf("unavailable offerings %v, want the interrupted m-2 spot", u)
	}
	f.removedWithin(victim, time.Minute)
	if f.clk.Now().After(deadline) {
		t.Errorf("the node went after its deadline")
	}
	f.waitRunning(1)
}

// TestDriftedNodesAreReplacedOneBudgetAtATime: a template label changes;
// both nodes have drifted; with a budget of one, one is replaced and
// drained, then the other.
func TestDriftedNodesAreReplacedOneBudgetAtATime(t *testing.T) {
	f := setup(t, "life-drift", 2)
	f.deployment(2)
	one := intstr.FromInt32(1)
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"}
		g.Spec.Disruption.Budget = &one
	})
	res := f.run()
	drifting := 0
	for _, d := range res.Plan.Disruptions {
		if d.Reason == v1alpha1.ReasonDrifted {
			drifting++
		}
	}
	if drifting != 1 {
		t.Fatalf("drift disruptions in the first round %d (%+v), want 1 (the budget)", drifting, res.Plan.Disruptions)
	}
	for _, old := range f.nodes {
		f.removedWithin(old, 2*time.Minute)
	}
	f.waitRunning(2)
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group.Name}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Labels["tier"] != "gold" {
			t.Errorf("node %s without the new label: %v", n.Name, n.Labels)
		}
	}
	if !hasEventOn(f, f.nodes[0], disruption.ReasonDrifted) && !hasEventOn(f, f.nodes[1], disruption.ReasonDrifted) {
		t.Errorf("no Drifted event on the old nodes")
	}
}

// TestExpiredNodesAreReplaced: expireAfter of an hour; an hour and a half
// later the node is replaced: a replacement is launched first, then the
// node is drained and removed, and its pod runs again.
func TestExpiredNodesAreReplaced(t *testing.T) {
	f := setup(t, "life-expire", 1)
	f.deployment(1)
	f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Hour} })
	if res := f.run(); len(res.Plan.Disruptions) != 0 {
		t.Fatalf("disruptions of a young node: %+v", res.Plan.Disruptions)
	}
	f.clk.Step(90 * time.Minute)
	res := f.tolerantRun()
	if len(res.Replacements) != 1 {
		t.Fatalf("round after expiry: disruptions %+v, replacements %v; want one replacement", res.Plan.Disruptions, res.Replacements)
	}
	// The API server dates the replacement in real time: back at it, the
	// replacement is as young as it is (ninety minutes ahead, it would
	// look expired too).
	f.clk.SetTime(time.Now())
	f.removedWithin(f.nodes[0], 2*time.Minute)
	f.waitRunning(1)
}

// TestADriftedNodeOfAFullGroupIsReplaced: the group is at its maxSize
// (1); the drifted node's replacement is launched all the same, the node
// it replaces not counted (the provider's maxSize check is told which
// node goes), and the node is then removed.
func TestADriftedNodeOfAFullGroupIsReplaced(t *testing.T) {
	f := setup(t, "life-full", 1, b.Size(0, 1))
	f.deployment(1)
	f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"} })
	f.removedWithin(f.nodes[0], 2*time.Minute)
	f.waitRunning(1)
}

// TestDriftDrainsCountAgainstTheDrainsOfARound: three idle nodes drift,
// their group's budget lets all go at once; one round starts at most
// MaxRemovalsPerRound drains (here 2) over every reason, drift included,
// and the next round starts the third.
func TestDriftDrainsCountAgainstTheDrainsOfARound(t *testing.T) {
	f := setup(t, "life-pace", 3)
	all := intstr.FromString("100%")
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"}
		g.Spec.Disruption.Budget = &all
	})
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: f.ctrl.Cloud, Recorder: f.events, Clock: f.clk},
		disruption.Options{Interval: time.Second, MaxRemovalsPerRound: 2})
	if res := f.run(); len(res.Started) != 2 {
		t.Fatalf("first round started %v, want 2 drains (MaxRemovalsPerRound)", res.Started)
	}
	f.clk.Step(time.Second)
	if res := f.run(); len(res.Started) != 1 {
		t.Errorf("second round started %v, want the third drifted node", res.Started)
	}
}

// TestRepairReplacesAnUnhealthyNodeButNotAPartition: repair on (at most
// 20 % of the group unhealthy); one of five nodes NotReady for 15 minutes
// is replaced; when two of five are, nothing is repaired.
func TestRepairReplacesAnUnhealthyNodeButNotAPartition(t *testing.T) {
	for _, tt := range []struct {
		name      string
		unhealthy int
		want      int
	}{{name: "one of five", unhealthy: 1, want: 1}, {name: "two of five (a partition)", unhealthy: 2, want: 0}} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, fmt.Sprintf("life-repair-%d", tt.unhealthy), 5)
			f.ctrl.Clock = clocktesting.NewFakeClock(time.Now())
			f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Disruption.Repair = &v1alpha1.Repair{} })
			for _, name := range f.nodes[:tt.unhealthy] {
				// KWOK no longer plays its kubelet: nothing posts Ready again.
				f.patchNode(name, func(n *corev1.Node) { delete(n.Annotations, v1alpha1.AnnotationKWOKNode) })
				f.patchNodeStatus(name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
					LastTransitionTime: metav1.Time{Time: time.Now().Add(-15 * time.Minute)}, Reason: "KubeletDown"})
			}
			res := f.tolerantRun()
			got := 0
			for _, d := range res.Plan.Disruptions {
				if d.Reason == v1alpha1.ReasonUnhealthy {
					got++
				}
			}
			if got != tt.want {
				t.Errorf("unhealthy disruptions %d (%+v), want %d; blocked %+v; node %+v", got, res.Plan.Disruptions, tt.want, res.Plan.Blocked, f.node(f.nodes[0]).Status.Conditions)
			}
		})
	}
}

// patchNodeStatus sets a condition on a node's status (KWOK may write it
// back; the test reads the round right after).
func (f *fixture) patchNodeStatus(name string, c corev1.NodeCondition) {
	f.t.Helper()
	n := f.node(name)
	patch := client.MergeFrom(n.DeepCopy())
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c.Type {
			n.Status.Conditions[i] = c
		}
	}
	if err := env.Client.Status().Patch(context.Background(), n, patch); err != nil {
		f.t.Fatal(err)
	}
}

func hasEventOn(f *fixture, object, reason string) bool {
	for _, e := range f.events.For(object) {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// TestEachNodeSaysWhatBerthDoesWithIt: after a round, each node carries
// the BerthDisruption condition: the node a bare pod holds says so (False,
// NotReplicated, naming the pod); the other one is Removable; once its
// drain starts it says Draining.
func TestEachNodeSaysWhatBerthDoesWithIt(t *testing.T) {
	f := setup(t, "life-cond", 2)
	held := f.nodes[0]
	f.createPod(b.Pod("bare", b.CPU("100m"), b.NodeName(held),
		func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }))
	f.ctrl.Clock = clocktesting.NewFakeClock(time.Now())
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Hour}
	})
	f.tolerantRun()
	cond := f.condition
	if c := cond(held); c.Status != corev1.ConditionFalse || c.Reason != "NotReplicated" || !strings.Contains(c.Message, "bare") {
		t.Errorf("condition of the held node: %+v, want False NotReplicated naming the pod", c)
	}
	if c := cond(f.nodes[1]); c.Status != corev1.ConditionTrue || c.Reason != "Removable" {
		t.Errorf("condition of the idle node: %+v, want True Removable", c)
	}
	for _, c := range f.node(held).Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Errorf("the kubelet's Ready condition was overwritten: %+v", c)
		}
	}
}

// interruptingCloud is the KWOK provider plus a cloud that announces an
// interruption of one node through the provider interface.
type interruptingCloud struct {
	*kwok.Provider
	node     string
	deadline time.Time
}

func (c interruptingCloud) Interruptions(context.Context, *v1alpha1.NodeGroup) ([]cloudprovider.Interruption, error) {
	return []cloudprovider.Interruption{{NodeName: c.node, Deadline: c.deadline, Message: "spot interruption warning"}}, nil
}

// TestAProvidersInterruptionTakesTheSamePath: a provider that learns of an
// interruption itself; the node gets the notice and is drained.
func TestAProvidersInterruptionTakesTheSamePath(t *testing.T) {
	f := setup(t, "life-provider", 2)
	deadline := f.clk.Now().Add(2 * time.Minute)
	f.ctrl.Cloud = interruptingCloud{Provider: kwok.New(env.Client, clock.RealClock{}), node: f.nodes[0], deadline: deadline}
	f.tolerantRun()
	n := f.node(f.nodes[0])
	if n == nil || n.Annotations[v1alpha1.AnnotationInterruptionDeadline] != deadline.UTC().Format(time.RFC3339) {
		t.Fatalf("node after the round: %+v, want the provider's deadline", n)
	}
	f.removedWithin(f.nodes[0], time.Minute)
}

// TestANodeOptedOutDuringItsDrainIsKept: a drain waits on a PDB
// that allows no disruption; the node's owner annotates it
// do-not-disrupt. The next round stops the drain and untaints the node,
// saying why; its pods were not evicted.
func TestANodeOptedOutDuringItsDrainIsKept(t *testing.T) {
	f := setup(t, "sd-optout", 2)
	victim := f.drainHeldByPDB()
	f.patchNode(victim, func(n *corev1.Node) { n.Annotations[v1alpha1.AnnotationDoNotDisrupt] = "true" })
	res := f.run()
	if !contains(res.GivenUp, victim) {
		t.Fatalf("given up %v after the opt-out, want %s", res.GivenUp, victim)
	}
	if n := f.node(victim); n == nil || tainted(n) {
		t.Errorf("node %s after the opt-out: want it kept and untainted", victim)
	}
	if !hasEventOn(f, victim, disruption.ReasonDrainStopped) {
		t.Errorf("no %s event on %s: %+v", disruption.ReasonDrainStopped, victim, f.events.For(victim))
	}
	f.waitRunning(2)
}

// TestAnInterruptionOfANodeDrainingForAnotherReasonKeepsItsDeadline: a
// node drains to be removed, its pod held by its PodDisruptionBudget;
// then its interruption notice comes. The deadline is the notice's (2
// minutes) from when berth first saw it, written on the node; once past,
// the node is removed with its pod (the deadline was worked out anew each
// round, moved on with the clock, and the node stayed).
func TestAnInterruptionOfANodeDrainingForAnotherReasonKeepsItsDeadline(t *testing.T) {
	f := setup(t, "life-int-drain", 2)
	victim := f.drainHeldByPDB()
	f.run() // the eviction is refused
	f.patchNode(victim, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Effect: corev1.TaintEffectNoSchedule})
	})
	f.clk.Step(time.Second)
	f.run()
	if d := f.node(victim).Annotations[v1alpha1.AnnotationInterruptionDeadline]; d != f.clk.Now().Add(lifecycle.DefaultNoticePeriod).UTC().Format(time.RFC3339) {
		t.Errorf("node %s: interruption deadline %q, want %s (the notice from now)", victim, d, f.clk.Now().Add(lifecycle.DefaultNoticePeriod).UTC().Format(time.RFC3339))
	}
	f.clk.Step(time.Minute)
	f.run()
	if f.node(victim) == nil {
		t.Fatalf("node %s removed before its deadline", victim)
	}
	f.clk.Step(2 * time.Minute)
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		f.run()
		return f.node(victim) == nil, "node " + victim + " still there past its interruption deadline", nil
	})
}

// TestARebalanceRecommendationOnADrainingNodeIsNoDeadline: a node drains,
// its pod held by its PodDisruptionBudget, in a group that acts on
// rebalance recommendations; then the node gets one. A recommendation is
// no interruption notice: the drain goes on at the budget's pace. (It was
// read as a notice without a deadline, and the node was removed at once
// with its pod.)
func TestARebalanceRecommendationOnADrainingNodeIsNoDeadline(t *testing.T) {
	f := setup(t, "life-rebalance-drain", 2)
	f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Disruption.Interruption = &v1alpha1.Interruption{Rebalance: true} })
	victim := f.drainHeldByPDB()
	f.run() // the eviction is refused
	f.patchNode(victim, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: lifecycle.RebalanceTaints[0], Effect: corev1.TaintEffectPreferNoSchedule})
	})
	for range 3 {
		f.clk.Step(10 * time.Second)
		f.tolerantRun()
	}
	if f.node(victim) == nil {
		t.Fatalf("node %s removed with its pod held by its budget, after a rebalance recommendation", victim)
	}
}

// laggingNodes is the API server's client with a node list that stays as
// it was when frozen (an informer cache that has not seen the round's own
// writes yet), and whose first failPatches writes to nodes lose a
// conflict (with a kubelet's status update).
type laggingNodes struct {
	client.Client
	frozen      *corev1.NodeList
	failPatches int
}

func (l *laggingNodes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if nl, ok := list.(*corev1.NodeList); ok && l.frozen != nil {
		l.frozen.DeepCopyInto(nl)
		return nil
	}
	return l.Client.List(ctx, list, opts...)
}

func (l *laggingNodes) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.Node); ok && l.failPatches > 0 {
		l.failPatches--
		return apierrors.NewConflict(corev1.Resource("nodes"), obj.GetName(), errors.New("the object has been modified"))
	}
	return l.Client.Patch(ctx, obj, patch, opts...)
}

// TestANodesReplacementIsLaunchedOnce: a drifted node's pod fits nowhere
// else, so a replacement is launched first and the node marked; an
// interrupted node gets its replacement and its drain at once. The next
// rounds read nodes that do not show the marks (the cache lags), or the
// mark's write lost a conflict: they must not launch a second
// replacement, and the node ends up marked (the drain's taint on the
// interrupted one).
func TestANodesReplacementIsLaunchedOnce(t *testing.T) {
	for _, tc := range []struct {
		name, group string
		interrupted bool
		failPatches int
	}{
		{name: "drifted, the cache lags", group: "life-lag"},
		{name: "drifted, the mark's write fails", group: "life-lag-fail", failPatches: 1},
		{name: "interrupted, the drain's write fails", group: "life-lag-spot", interrupted: true, failPatches: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, tc.group, 1)
			f.deployment(1)
			if tc.interrupted {
				f.patchNode(f.nodes[0], func(n *corev1.Node) {
					n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Effect: corev1.TaintEffectNoSchedule})
					n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = f.clk.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
				})
			} else {
				f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"} })
			}
			lag := &laggingNodes{Client: env.Client, frozen: &corev1.NodeList{}, failPatches: tc.failPatches}
			if err := env.Client.List(context.Background(), lag.frozen); err != nil {
				t.Fatal(err)
			}
			ctrl := disruption.New(disruption.Deps{Client: lag, APIReader: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}),
				Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
			var launched []string
			for round := range 3 {
				res, err := ctrl.RunOnce(context.Background())
				if res != nil {
					launched = append(launched, res.Replacements...)
				}
				t.Logf("round %d: replacements %v, error %v", round, launched, err)
			}
			if len(launched) != 1 {
				t.Fatalf("replacements launched %v, want one", launched)
			}
			nodes := &corev1.NodeList{}
			if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group.Name}); err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) > 2 {
				t.Errorf("the group has %d nodes, want the node and its replacement", len(nodes.Items))
			}
			n := f.node(f.nodes[0])
			if tc.interrupted && n != nil && !nodeutil.Disrupted(n) { // nil: drained and removed already
				t.Errorf("the interrupted node is not draining: taints %v", n.Spec.Taints)
			}
			if !tc.interrupted && n == nil {
				t.Fatal("the drifted node is gone before its replacement is up")
			}
			if !tc.interrupted && n.Annotations[v1alpha1.AnnotationReplacedBy] != launched[0] {
				t.Errorf("the drifted node is marked replaced by %q, want %q", n.Annotations[v1alpha1.AnnotationReplacedBy], launched[0])
			}
		})
	}
}
