package disruption_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestANodeItsBudgetHeldBackKeepsItsConsolidateAfter (Cluster
// Autoscaler's unneeded.Nodes: a node is unneeded since the first round
// its removal simulated, whatever the budgets, minSize and cooldowns that
// crop the deletions of a round; Karpenter's Consolidatable condition
// likewise counts from the node's last pod event, not from when its
// budget opened): three empty nodes, a budget of one, consolidateAfter
// 10m. The first goes after 10m; once it is gone, the second has been
// removable for longer than 10m and only its budget kept it, so its
// drain starts in the next round instead of 10m later.
func TestANodeItsBudgetHeldBackKeepsItsConsolidateAfter(t *testing.T) {
	f := setup(t, "sd-budget-clock", 3)
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		one := intstr.FromInt32(1)
		g.Spec.Disruption.Budget = &one
		g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 10 * time.Minute}
	})
	res := f.run()
	if len(res.Started) != 0 || len(res.Plan.Remove) != 1 {
		t.Fatalf("first round: started %v, planned %+v; want one removal planned, none started before consolidateAfter", res.Started, res.Plan.Remove)
	}
	f.clk.Step(11 * time.Minute)
	res = f.run()
	if len(res.Started) != 1 {
		t.Fatalf("after consolidateAfter: started %v, want one node (budget 1)", res.Started)
	}
	first := res.Started[0]
	f.removedWithin(first, time.Minute)

	res = f.run()
	if len(res.Started) != 1 {
		t.Fatalf("the round after %s went: started %v (planned %+v), want the next empty node: it has been removable since the first round, 11m ago, "+
			"longer than consolidateAfter (10m); only the budget held it back", first, res.Started, res.Plan.Remove)
	}
}

// TestANodeWaitingForAnOnCompletionPodKeepsItsConsolidateAfter (Cluster
// Autoscaler: a pod annotated safe-to-evict "on-completion" is waited for
// (drainability.WaitForCompletion), not a blocker: its node's removal
// simulates, the node is unneeded from then, and planner.NodesToDelete
// only holds its deletion while the pod runs; docs/safety.md says berth's
// block has the "same effect"): an empty-but-for-that-pod node, consolidateAfter
// 10m. The pod runs 11m and finishes; the node has been waiting for it
// only, so its drain starts in the next round, not 10m later.
func TestANodeWaitingForAnOnCompletionPodKeepsItsConsolidateAfter(t *testing.T) {
	f := setup(t, "sd-oncompletion-clock", 1)
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 10 * time.Minute}
	})
	job := f.createPod(b.Pod("job", b.NodeName(f.nodes[0]), b.CPU("100m"),
		b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "on-completion")))
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		res := f.run()
		return len(res.Plan.Blocked) == 1 && res.Plan.Blocked[0].Reason == "NotSafeToEvict", "the node is not reported kept for its on-completion pod yet", nil
	})
	f.clk.Step(11 * time.Minute)
	if err := env.Client.Delete(context.Background(), job, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &corev1.Pod{})
		return client.IgnoreNotFound(err) == nil && err != nil, "pod job still there", client.IgnoreNotFound(err)
	})
	if res := f.run(); len(res.Started) != 1 {
		t.Fatalf("the round after its on-completion pod finished: started %v (planned %+v); want the node: it has waited 11m "+
			"for that pod only, longer than consolidateAfter (10m)", res.Started, res.Plan.Remove)
	}
}

// TestANodeCountingDownIsNotOvertakenByOneThatJustBecameRemovable
// (Cluster Autoscaler's previouscandidates.PreviousCandidates sorts the
// nodes unneeded in the previous loop first, so that they stay unneeded
// and their unneeded time runs on): two nodes whose pods fit on one of
// them. a (700m) is the less used and planned removable; its
// consolidateAfter (10m) runs. Then a pod of b finishes and b (500m) is
// the less used: berth now plans b, a's clock is lost, b's starts again,
// and at 10m nothing goes; churn of this kind keeps any node from going.
// Cluster Autoscaler tries a first again and removes it at 10m.
func TestANodeCountingDownIsNotOvertakenByOneThatJustBecameRemovable(t *testing.T) {
	f := setup(t, "sd-sticky", 2)
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 10 * time.Minute}
	})
	a, bn := f.nodes[0], f.nodes[1]
	movable := b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true")
	f.createPod(b.Pod("on-a", b.NodeName(a), b.CPU("700m"), movable))
	f.createPod(b.Pod("on-b-1", b.NodeName(bn), b.CPU("500m"), movable))
	finishing := f.createPod(b.Pod("on-b-2", b.NodeName(bn), b.CPU("500m"), movable))
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		res := f.run()
		removes := make([]string, 0, len(res.Plan.Remove))
		for _, r := range res.Plan.Remove {
			removes = append(removes, r.Node)
		}
		return slices.Equal(removes, []string{a}), "planned removals " + strings.Join(removes, " ") + ", want only " + a + " (the less used)", nil
	})
	// b's second pod goes: b is now the less used node.
	if err := env.Client.Delete(context.Background(), finishing, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(finishing), &corev1.Pod{})
		return client.IgnoreNotFound(err) == nil && err != nil, "pod on-b-2 still there", client.IgnoreNotFound(err)
	})
	f.clk.Step(11 * time.Minute)
	res := f.run()
	if !slices.Equal(res.Started, []string{a}) {
		var planned []string
		for _, r := range res.Plan.Remove {
			planned = append(planned, r.Node)
		}
		t.Fatalf("11m after %s was first planned removable: started %v (planned %v); want %s, whose pod still fits on %s: "+
			"it has been removable for longer than consolidateAfter and is tried first, as Cluster Autoscaler tries its previous candidates",
			a, res.Started, planned, a, bn)
	}
}
