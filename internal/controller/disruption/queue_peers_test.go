package disruption_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
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
	sick.Status = status
	if err := env.Client.Status().Update(context.Background(), sick); err != nil {
		t.Fatal(err)
	}
	cloud.mu.Lock()
	cloud.gone = true // it is no longer launching: it is there
	cloud.mu.Unlock()
	for range 3 {
		f.clk.Step(10 * time.Minute)
		f.run()
	}
	if got := f.markedBy(repl); got != 0 {
		t.Errorf("30 minutes after the launch, %d of the 3 old nodes still marked replaced by %s, which came up once and has been NotReady since; "+
			"want the replacement given up (or gone on with)", got, repl)
	}
}
