package disruption_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestAReplacementThatWentNotReadyDoesNotHoldItsNodesForEver: a cheaper
// node replaces three (slowReplacement); it registers, is seen Ready once
// (labelled initialized), and goes NotReady for good (its kubelet died)
// before the old nodes' drain starts. Karpenter's orchestration queue
// either goes on (the replacement is initialized: queue.go
// waitOrTerminate) or, past its retry duration (10 minutes), gives the
// command up and untaints the candidates (queue_test.go "should untaint
// nodes when a command times out"). The old nodes must not stay marked
// replaced-by for ever: while they are, they are no candidate for
// anything, use the group's budget, and no other replacement is launched
// in the cluster (replacing).
func TestAReplacementThatWentNotReadyDoesNotHoldItsNodesForEver(t *testing.T) {
	f, cloud, repl := slowReplacement(t, "sd-replace-sick")
	sick := b.Node(repl, "8", "32Gi", b.LaunchedBy(f.group), b.NodeLabels(v1alpha1.LabelInstanceType, "l-8", v1alpha1.LabelZone, "zone-a",
		v1alpha1.LabelCapacityType, "on-demand"), func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			LastTransitionTime: metav1.NewTime(time.Now()), Reason: "NodeStatusUnknown"}}
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}
	})
	status := sick.Status
	if err := env.Client.Create(context.Background(), sick); err != nil {
		t.Fatal(err)
	}
	// A merge patch: the node lifecycle may write the node meanwhile.
	patch := client.MergeFrom(sick.DeepCopy())
	sick.Status = status
	if err := env.Client.Status().Patch(context.Background(), sick, patch); err != nil {
		t.Fatal(err)
	}
	cloud.mu.Lock()
	cloud.gone = true // it is no longer launching: it is there
	cloud.mu.Unlock()
	for range 3 {
		f.clk.Step(10 * time.Minute)
		f.run()
	}
	if n := f.node(repl); n == nil || nodeutil.Schedulable(n) {
		t.Fatalf("replacement %s is gone or Ready: the test wants it there and NotReady", repl)
	}
	if got := f.markedBy(repl); got != 0 {
		t.Errorf("30 minutes after the launch, %d of the 3 old nodes still marked replaced by %s, which came up once and has been NotReady since; "+
			"want the replacement given up (or gone on with)", got, repl)
	}
}

// TestAPodNominatedToANodeBeingReplacedHoldsItsDrain: a cheaper node
// replaces three; while it boots, a pod is nominated to one of the old
// nodes (kube-scheduler preempted there for it, or a per-node reserve
// was handed to it). Once the replacement is Ready, that node is not
// drained while the pod is on its way (its room would be gone, its
// victim killed for nothing; the two others are), and its replacement is
// not given up: its drain starts once the nomination is gone. (Karpenter re-validates a
// decision for a nominated pod too.)
func TestAPodNominatedToANodeBeingReplacedHoldsItsDrain(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-replace-nominated", 3)
	f.deploymentOf(3, "1200m")
	f.updateGroup(func(g *v1alpha1.NodeGroup) { b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g) })
	var repl string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		if res := f.run(); len(res.Replacements) == 1 {
			repl = res.Replacements[0]
		}
		return repl != "", "no replacement launched", nil
	})
	victim := f.nodes[0]
	// A scheduler of another name keeps kube-scheduler from clearing the
	// nomination.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "preemptor", Namespace: f.ns}, Spec: corev1.PodSpec{SchedulerName: "elsewhere",
		Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	nominate := client.MergeFrom(pod.DeepCopy())
	pod.Status.NominatedNodeName = victim
	if err := env.Client.Status().Patch(ctx, pod, nominate); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 2*time.Minute, func(context.Context) (bool, string, error) {
		f.run()
		n := f.node(repl)
		return n != nil && nodeutil.Schedulable(n), "replacement " + repl + " not Ready", nil
	})
	for range 3 {
		f.clk.Step(10 * time.Second)
		f.run()
	}
	switch n := f.node(victim); {
	case n == nil || tainted(n):
		t.Fatalf("old node %s drained while pod %s is nominated to it", victim, pod.Name)
	case n.Annotations[v1alpha1.AnnotationReplacedBy] != repl:
		t.Fatalf("old node %s no longer marked replaced by %s: the replacement was given up for a nomination", victim, repl)
	}
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		f.clk.Step(10 * time.Second)
		f.run()
		n := f.node(victim)
		return n == nil || tainted(n), "old node " + victim + " not drained once the nomination is gone", nil
	})
}
