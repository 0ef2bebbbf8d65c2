package drain

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// ReasonDoNotDisrupt is the reason of a pod that asks not to be disrupted.
const ReasonDoNotDisrupt Reason = "DoNotDisrupt"

// Annotations and labels of other autoscalers that berth honours, so that
// users can switch without relabelling.
const (
	// AnnotationKarpenterDoNotDisrupt is Karpenter's opt-out, on a pod or
	// a node.
	AnnotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	labelOceanRestrictScaleDown     = "spotinst.io/restrict-scale-down"
)

// DoNotDisrupt blocks: a pod annotated berth.dev/do-not-disrupt: "true" (or
// karpenter.sh/do-not-disrupt: "true", or labelled
// spotinst.io/restrict-scale-down: "true") keeps its node while it runs,
// whatever kind of pod it is: a DaemonSet's or a static pod marked so (a
// node agent finishing work of its own) keeps its node too, as Karpenter
// has it. A finished or terminating pod is on its way out and asks
// nothing.
type DoNotDisrupt struct{}

// Name returns the rule's reason.
func (DoNotDisrupt) Name() Reason { return ReasonDoNotDisrupt }

// Check implements Rule.
func (DoNotDisrupt) Check(p *corev1.Pod, _ *Context) Outcome {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Outcome{}
	}
	for _, key := range []string{v1alpha1.AnnotationDoNotDisrupt, AnnotationKarpenterDoNotDisrupt} {
		if p.Annotations[key] == "true" {
			return Outcome{Verdict: Blocks, Reason: ReasonDoNotDisrupt,
				Message: "pod " + podName(p) + " is annotated " + key + ": \"true\""}
		}
	}
	if p.Labels[labelOceanRestrictScaleDown] == "true" {
		return Outcome{Verdict: Blocks, Reason: ReasonDoNotDisrupt,
			Message: "pod " + podName(p) + " is labelled " + labelOceanRestrictScaleDown + ": \"true\""}
	}
	return Outcome{}
}
