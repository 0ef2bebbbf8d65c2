package drain_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestATerminatingPodSpendsNoDisruption: kube-apiserver's eviction
// ignores the budgets of a pod being deleted (canIgnorePDB: Pending,
// Succeeded, Failed or a deletion timestamp). The Terminating rule moves
// such a pod "whatever the budget", but Budgets.Take still counts it: a
// budget that allows none refuses the node, and one that allows one is
// spent on it.
func TestATerminatingPodSpendsNoDisruption(t *testing.T) {
	budgets := drain.NewBudgets([]*policyv1.PodDisruptionBudget{pdb("default", 0, "app", "web")})
	leaving := b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodRunning), func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: now}
	})
	if err := budgets.Take([]*corev1.Pod{leaving}); err != nil {
		t.Errorf("a pod being deleted refused by its budget: %v", err)
	}
}
