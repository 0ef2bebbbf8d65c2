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
	annotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	labelOceanRestrictScaleDown     = "spotinst.io/restrict-scale-down"
)

// DoNotDisrupt blocks: a pod annotated berth.dev/do-not-disrupt: "true" (or
// karpenter.sh/do-not-disrupt: "true", or labelled
// spotinst.io/restrict-scale-down: "true") keeps its node.
type DoNotDisrupt struct{}

// Name returns the rule's reason.
func (DoNotDisrupt) Name() Reason { return ReasonDoNotDisrupt }

// Check implements Rule.
func (DoNotDisrupt) Check(p *corev1.Pod, _ *Context) Outcome {
	for _, key := range []string{v1alpha1.AnnotationDoNotDisrupt, annotationKarpenterDoNotDisrupt} {
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
