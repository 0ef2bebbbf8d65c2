package drain

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonNotReplicated is the reason of a pod no controller would recreate.
const ReasonNotReplicated Reason = "NotReplicated"

// NotReplicated blocks: a pod without a controlling owner (a bare pod) would
// be gone for good once evicted, so it keeps its node unless annotated
// cluster-autoscaler.kubernetes.io/safe-to-evict: "true". A pod of any
// controller counts as replicated, custom kinds included (as Karpenter,
// and Cluster Autoscaler with --skip-nodes-with-custom-controller-pods=
// false): berth cannot tell whether a custom controller recreates its
// pods, and blocking every operator's pods would stop scale-down in most
// clusters.
type NotReplicated struct{}

// Name returns the rule's reason.
func (NotReplicated) Name() Reason { return ReasonNotReplicated }

// Check implements Rule.
func (NotReplicated) Check(p *corev1.Pod, _ *Context) Outcome {
	if metav1.GetControllerOfNoCopy(p) == nil {
		return Outcome{Verdict: Blocks, Reason: ReasonNotReplicated,
			Message: "pod " + podName(p) + " is not backed by a controller (annotate it " + annotationSafeToEvict + ": \"true\" to allow evicting it)"}
	}
	return Outcome{}
}
