package scaledown_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

var rt0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// mixGroup has a cheap small-2, a medium-4 and a dear large-8, consolidateAfter 10m.
func mixGroup() *v1alpha1.NodeGroup {
	return group("mix", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 10 * time.Minute}
		b.InstanceType("small-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))(ng)
		b.InstanceType("medium-4", "4", "16Gi", b.OnDemand("zone-a", "0.15"))(ng)
		b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"))(ng)
	})
}

// controllerRounds runs rounds every 30s as the controller does: Run with
// Since and Now, Follow, then a due removal's node goes (an empty node's
// drain is instant) and a replacement whose nodes all counted their
// consolidateAfter is launched (dueAll). nodesAt gives the cluster at a
// time (nodes removed so far left out). It returns when the replacement
// was due, or zero.
func controllerRounds(t *testing.T, ng *v1alpha1.NodeGroup, until time.Duration, nodesAt func(time.Duration) []*corev1.Node, pods []*corev1.Pod) time.Duration {
	t.Helper()
	since := scaledown.Countdown{}
	gone := map[string]bool{}
	after := ng.Spec.Disruption.After()
	for d := time.Duration(0); d <= until; d += 30 * time.Second {
		now := rt0.Add(d)
		var nodes []*corev1.Node
		for _, n := range nodesAt(d) {
			if !gone[n.Name] {
				nodes = append(nodes, n)
			}
		}
		plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: now, Since: since})
		if err != nil {
			t.Fatal(err)
		}
		since.Follow(plan, now)
		for _, r := range plan.Remove {
			if now.Sub(since[r.Node]) >= after {
				gone[r.Node] = true
				t.Logf("%v: %s removed", d, r.Node)
			}
		}
		for _, r := range plan.Replace {
			due := true
			for _, n := range r.Nodes {
				s, ok := since[n]
				due = due && ok && now.Sub(s) >= after
			}
			if due {
				t.Logf("%v: replacement of %v due", d, r.Nodes)
				return d
			}
		}
		if s, ok := since["big"]; ok {
			_ = s
		} else if d > 0 {
			t.Logf("%v: big's count lost (replace %d, remove %d)", d, len(plan.Replace), len(plan.Remove))
		}
	}
	return 0
}

// TestAReplacementKeepsItsCountWhileEmptyNodesGo: big (a large-8 at
// 0.40/h) holds a 2500m pod no other node has room for; a medium-4
// (0.15/h) would replace it. Meanwhile, as batch nodes do, an empty
// small-2 node appears every 5 minutes and goes after its 10m. A round
// where an empty node is due plans no replacement (replace runs only when
// nothing due can be removed), big is neither removed, replaced nor held
// (Waits), and Follow forgets its count: big is never replaced.
func TestAReplacementKeepsItsCountWhileEmptyNodesGo(t *testing.T) {
	ng := mixGroup()
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	big := b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8"))
	pods := []*corev1.Pod{app("on-big", "big", "2500m")}
	nodesAt := func(d time.Duration) []*corev1.Node {
		out := []*corev1.Node{big}
		for k := 0; time.Duration(k)*5*time.Minute <= d; k++ {
			out = append(out, b.Node(fmt.Sprintf("e-%02d", k), "2", "8Gi", b.LaunchedBy(ng), lbl("small-2")))
		}
		return out
	}
	if at := controllerRounds(t, ng, 60*time.Minute, nodesAt, pods); at == 0 {
		t.Errorf("in 60m big's replacement was never due: each empty node due made the round plan no replacement and big's count was lost")
	}
}

// TestAReplacementKeepsItsCountWhileTheBudgetGoesToEmptyNodes: as
// TestAReplacementKeepsItsCountWhileEmptyNodesGo, with the group's default
// budget (10 %: one node here). Each round an empty node is due, its
// removal takes the budget and big's replacement is not planned; big
// waits for the budget (Waits) and keeps its count, so the replacement is
// due in the first round the budget is free. Before, big lost its count
// in every such round and was never replaced. (Found by a review.)
func TestAReplacementKeepsItsCountWhileTheBudgetGoesToEmptyNodes(t *testing.T) {
	ng := mixGroup()
	ng.Spec.Disruption.Budget = nil // the default, 10 %
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	big := b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8"))
	pods := []*corev1.Pod{app("on-big", "big", "2500m")}
	nodesAt := func(d time.Duration) []*corev1.Node {
		out := []*corev1.Node{big}
		for k := 0; time.Duration(k)*5*time.Minute <= d; k++ {
			out = append(out, b.Node(fmt.Sprintf("e-%02d", k), "2", "8Gi", b.LaunchedBy(ng), lbl("small-2")))
		}
		return out
	}
	if at := controllerRounds(t, ng, 60*time.Minute, nodesAt, pods); at == 0 || at > 11*time.Minute {
		t.Errorf("big's replacement due at %v, want by 11m (its 10m counted, then the first round the budget is free); 0 is never", at)
	}
}

// TestANodeWaitingForTheBudgetSaysWhichReplacementWaits: a round where an
// empty node's removal takes the group's budget of one says of the node a
// cheaper one would replace that it waits for the budget, naming the
// replacement, and counts (Waits): not that its pod has no home.
func TestANodeWaitingForTheBudgetSaysWhichReplacementWaits(t *testing.T) {
	ng := mixGroup()
	ng.Spec.Disruption.Budget = nil
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	nodes := []*corev1.Node{
		b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8")),
		b.Node("e-00", "2", "8Gi", b.LaunchedBy(ng), lbl("small-2")),
	}
	pods := []*corev1.Pod{app("on-big", "big", "2500m")}
	since := scaledown.Countdown{"e-00": rt0.Add(-10 * time.Minute)}
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: rt0, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Remove) != 1 || plan.Remove[0].Node != "e-00" || len(plan.Replace) != 0 {
		t.Fatalf("plan removes %+v and replaces %+v, want e-00 removed and no replacement (the budget is one node)", plan.Remove, plan.Replace)
	}
	var got *scaledown.Blocked
	for i := range plan.Blocked {
		if plan.Blocked[i].Node == "big" {
			got = &plan.Blocked[i]
		}
	}
	if got == nil || got.Reason != scaledown.ReasonBudget || !got.Waits || !strings.Contains(got.Message, "medium-4") || !strings.Contains(got.Message, "would replace big") {
		t.Errorf("big is blocked as %+v, want waiting (Waits) for the budget, naming its medium-4 replacement", got)
	}
}

// TestAReplacementIsDueWithoutChurn: the same cluster with one empty node
// only: the replacement is due, but a consolidateAfter late.
func TestAReplacementIsDueWithoutChurn(t *testing.T) {
	ng := mixGroup()
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	big := b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8"))
	e := b.Node("e-00", "2", "8Gi", b.LaunchedBy(ng), lbl("small-2"))
	pods := []*corev1.Pod{app("on-big", "big", "2500m")}
	at := controllerRounds(t, ng, 60*time.Minute, func(time.Duration) []*corev1.Node { return []*corev1.Node{big, e} }, pods)
	if at != 10*time.Minute {
		t.Errorf("big's replacement due at %v, want 10m (counting since the first round, as e-00 did)", at)
	}
}

// TestANodeBeingReplacedIsNoHomeForAWaitingNodesPods: the first round
// (nothing counting yet) plans big's replacement, then considers the
// waiting node w and plans w's pod onto big, the node being replaced.
func TestANodeBeingReplacedIsNoHomeForAWaitingNodesPods(t *testing.T) {
	ng := mixGroup()
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	nodes := []*corev1.Node{
		b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8")),
		b.Node("w", "2", "8Gi", b.LaunchedBy(ng), lbl("small-2")),
		b.Node("z", "4", "16Gi"), // not berth's, nearly full
	}
	pods := []*corev1.Pod{app("on-big", "big", "2500m"), app("on-w", "w", "1"), app("on-z", "z", "3500m")}
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: rt0, Since: scaledown.Countdown{}})
	if err != nil {
		t.Fatal(err)
	}
	replaced := map[string]bool{}
	for _, r := range plan.Replace {
		t.Logf("replace %v by a %s", r.Nodes, r.New.InstanceType)
		for _, n := range r.Nodes {
			replaced[n] = true
		}
	}
	for _, r := range plan.Remove {
		for _, m := range r.Evict {
			t.Logf("remove %s: %s -> %s", r.Node, m.Pod, m.To)
			if replaced[m.To] {
				t.Errorf("removal of %s moves %s onto %s, which the same plan replaces", r.Node, m.Pod, m.To)
			}
		}
	}
}

// TestAWhenEmptyNodeStartsCountingOnlyOnceEmpty: group WhenEmpty; n1 runs
// a Job pod annotated safe-to-evict on-completion and a Deployment's pod.
// The policy removes n1 only once it is empty, yet it counts from t0
// (classify's Waits skips refuse's policy check). D goes at 20m, J
// finishes at 20m10s: n1 is removed in that round, removable for 0s.
func TestAWhenEmptyNodeStartsCountingOnlyOnceEmpty(t *testing.T) {
	ng := group("g", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationWhenEmpty
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 10 * time.Minute}
	})
	nodes := []*corev1.Node{node("n1", ng), node("n2", ng, b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true"))}
	job := func(phase corev1.PodPhase) *corev1.Pod {
		return b.Pod("j", b.NodeName("n1"), b.CPU("500m"), b.OwnedBy("Job", "j"), b.Phase(phase),
			b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "on-completion"))
	}
	d := app("d", "n1", "500m")
	since := scaledown.Countdown{}
	for at := time.Duration(0); at <= 21*time.Minute; at += 10 * time.Second {
		now := rt0.Add(at)
		pods := []*corev1.Pod{job(corev1.PodRunning), d}
		switch {
		case at >= 20*time.Minute+10*time.Second:
			pods = []*corev1.Pod{job(corev1.PodSucceeded)}
		case at >= 20*time.Minute:
			pods = []*corev1.Pod{job(corev1.PodRunning)}
		}
		plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: now, Since: since})
		if err != nil {
			t.Fatal(err)
		}
		since.Follow(plan, now)
		if at == 0 {
			for _, bl := range plan.Blocked {
				t.Logf("t0: blocked %s %s waits=%v", bl.Node, bl.Reason, bl.Waits)
			}
		}
		for _, r := range plan.Remove {
			if now.Sub(since[r.Node]) >= ng.Spec.Disruption.After() {
				// From 20m only the finishing Job pod is left: removable but for it.
				if waited := now.Sub(rt0.Add(20 * time.Minute)); waited < 10*time.Minute {
					t.Fatalf("at %v %s is removed, removable under WhenEmpty (but for its finishing pod) for %v only; counting since %v", at, r.Node, waited, since[r.Node].Sub(rt0))
				}
				return
			}
		}
	}
}

// TestThePlanAndTheControllerAgreeOnWhatIsDue: big and w count since S
// (the same round). The controller plans with Input.Now read at gather and
// decides with its clock read after planning (due, dueAll): at
// S+10m-1s in the plan and S+10m+1s in due, neither node is due to the
// planner, so it plans big's replacement and then w's removal, onto big;
// the controller then starts both in one round: w's pod goes to big (not
// cordoned until its drain), which the medium-4 was sized without.
func TestThePlanAndTheControllerAgreeOnWhatIsDue(t *testing.T) {
	ng := mixGroup()
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	nodes := []*corev1.Node{
		b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8")),
		b.Node("w", "2", "8Gi", b.LaunchedBy(ng), lbl("small-2")),
		b.Node("z", "4", "16Gi"),
	}
	pods := []*corev1.Pod{app("on-big", "big", "3"), app("on-w", "w", "1500m"), app("on-z", "z", "3500m")}
	since := scaledown.Countdown{"big": rt0, "w": rt0}
	gathered, decided := rt0.Add(10*time.Minute-time.Second), rt0.Add(10*time.Minute+time.Second)
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: gathered, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	since.Follow(plan, decided) // as due does
	after := ng.Spec.Disruption.After()
	var started, replaced []string
	for _, r := range plan.Remove {
		if decided.Sub(since[r.Node]) >= after {
			started = append(started, fmt.Sprintf("%s (%v)", r.Node, r.Evict))
		}
	}
	for _, r := range plan.Replace {
		due := true
		for _, n := range r.Nodes {
			s, ok := since[n]
			due = due && ok && decided.Sub(s) >= after
		}
		if due {
			replaced = append(replaced, fmt.Sprintf("%v by a %s for %v", r.Nodes, r.New.InstanceType, r.New.Pods))
		}
	}
	if len(started) > 0 && len(replaced) > 0 {
		t.Errorf("one round starts the drain of %v and launches the replacement of %v", started, replaced)
	}
}

// TestADueNodeReplacedIsNotAlsoReportedKept: the assertion of
// TestANodeIsNotBothReplacedAndRemovedOrBlocked, in a round where the
// node is due (counting for 10m).
func TestADueNodeReplacedIsNotAlsoReportedKept(t *testing.T) {
	ng := mixGroup()
	lbl := func(it string) b.NodeOption {
		return b.NodeLabels(v1alpha1.LabelInstanceType, it, v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand")
	}
	nodes := []*corev1.Node{b.Node("big", "8", "32Gi", b.LaunchedBy(ng), lbl("large-8"))}
	pods := []*corev1.Pod{app("on-big", "big", "2500m")}
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes, Pods: pods, Now: rt0.Add(10 * time.Minute), Since: scaledown.Countdown{"big": rt0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Replace) != 1 {
		t.Fatalf("replace %+v", plan.Replace)
	}
	for _, bl := range plan.Blocked {
		if bl.Node == "big" {
			t.Errorf("big is replaced and also reported kept: %s (%s)", bl.Reason, bl.Message)
		}
	}
}
