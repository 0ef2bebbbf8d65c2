package drain

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonSystemPodWithoutPDB is the reason of a kube-system pod without a
// PodDisruptionBudget.
const ReasonSystemPodWithoutPDB Reason = "SystemPodWithoutPDB"

// SystemPodWithoutPDB blocks: a kube-system pod (DNS, metrics) that no
// PodDisruptionBudget covers keeps its node, as in Cluster Autoscaler:
// evicting the cluster's plumbing needs the owner's say. Unlike Cluster
// Autoscaler, age does not lift the block (it lets such pods go once they
// are an hour old by default): an old DNS pod is no safer to evict.
type SystemPodWithoutPDB struct{}

// Name returns the rule's reason.
func (SystemPodWithoutPDB) Name() Reason { return ReasonSystemPodWithoutPDB }

// Check implements Rule.
func (SystemPodWithoutPDB) Check(p *corev1.Pod, c *Context) Outcome {
	if p.Namespace == metav1.NamespaceSystem && len(c.PDBs.Matching(p)) == 0 {
		return Outcome{Verdict: Blocks, Reason: ReasonSystemPodWithoutPDB,
			Message: "pod " + podName(p) + " is in kube-system and no PodDisruptionBudget covers it"}
	}
	return Outcome{}
}
