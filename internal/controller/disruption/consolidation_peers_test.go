package disruption_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestANodeWaitingItsConsolidateAfterDoesNotHoldBackOtherReplacements:
// Karpenter's consolidateAfter keeps a node from being a candidate until
// it has passed ("should wait for the node TTL for non-empty nodes before
// consolidating"; "should replace a node with a cheaper one even when
// consolidateAfter has not expired"): a node still waiting holds back no
// other node's consolidation. berth plans a replacement only when the
// plan removes nothing, and the plan lists a removal that is not due yet
// (its group's consolidateAfter runs in the controller, decide.go due):
// an empty node of a group with consolidateAfter 1h keeps the three
// nodes of another group (consolidateAfter 0) from being replaced by a
// cheaper one for that hour. A removal that waits for its window already
// holds nothing back (TestARemovalWaitingForItsWindowHoldsNothingBack).
func TestANodeWaitingItsConsolidateAfterDoesNotHoldBackOtherReplacements(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-kp-repl", 3)
	f.deploymentOf(3, "1200m") // one per node, and only on this group's nodes
	slow := setup(t, "sd-kp-slow", 1)
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(slow.group), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Hour}
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.group), g); err != nil {
		t.Fatal(err)
	}
	b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g)
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	var last string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		f.clk.Step(10 * time.Second) // far from the slow group's hour
		res := f.run()
		var removals []string
		for _, r := range res.Plan.Remove {
			removals = append(removals, r.Node)
		}
		last = fmt.Sprintf("planned removals %v (started %v), replacements %+v", removals, res.Started, res.Plan.Replace)
		return len(res.Replacements) == 1, "no replacement launched: " + last, nil
	})
}

// TestANodeWaitingItsConsolidateAfterTakesNoBudgetFromOneThatWaited:
// Karpenter counts only candidates past their consolidateAfter against a
// budget ("should only allow 3 nodes to be deleted in single node
// consolidation delete"; "should wait for the node TTL for non-empty nodes
// before consolidating"). berth's planner gives the budget to the least
// utilised removable node whether or not it has waited its
// consolidateAfter, and the controller forgets when a node it blocks
// became removable (decide.go due): a node that turns removable later
// keeps one that waited long enough from going, and restarts its wait.
//
// Budget 1, consolidateAfter 1m; y (200m) is planned first, x (1500m)
// has no home for its pod; 50s later x is emptied; at 70s y has been
// removable for 70s in a row, x for 20s: y must go.
func TestANodeWaitingItsConsolidateAfterTakesNoBudgetFromOneThatWaited(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-kp-budget", 3)
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.group), g); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	g.Spec.Disruption.Budget = &one
	g.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Minute}
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	y, x, z := f.nodes[0], f.nodes[1], f.nodes[2]
	movable := func(name, cpu, node string) *corev1.Pod {
		return f.createPod(b.Pod(name, b.CPU(cpu), b.NodeName(node), b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true"),
			func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }))
	}
	movable("on-z", "1", z)
	movable("on-y", "200m", y)
	onX := movable("on-x", "1500m", x) // fits on no other node: x is not removable until it goes
	f.waitRunning(3)
	planned := func(res *disruption.Result) []string {
		var out []string
		for _, r := range res.Plan.Remove {
			out = append(out, r.Node)
		}
		return out
	}
	if res := f.run(); len(res.Started) != 0 || fmt.Sprint(planned(res)) != fmt.Sprint([]string{y}) {
		t.Fatalf("at 0s: started %v, planned %v; want y (%s) planned, waiting its consolidateAfter", res.Started, planned(res), y)
	}
	f.clk.Step(50 * time.Second)
	if err := env.Client.Delete(ctx, onX, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(onX), &corev1.Pod{})
		return apierrors.IsNotFound(err), "pod on-x still there", client.IgnoreNotFound(err)
	})
	res := f.run()
	t.Logf("at 50s, x (%s) emptied: planned %v, started %v", x, planned(res), res.Started)
	f.clk.Step(20 * time.Second)
	res = f.run()
	if len(res.Started) != 1 || res.Started[0] != y {
		var why []string
		for _, bl := range res.Plan.Blocked {
			if bl.Node == y {
				why = append(why, string(bl.Reason)+": "+bl.Message)
			}
		}
		t.Errorf("at 70s: started %v, planned %v, y says %v; want y (%s) started: removable for 70s in a row, consolidateAfter 1m, budget 1 and nothing draining",
			res.Started, planned(res), why, y)
	}
}
