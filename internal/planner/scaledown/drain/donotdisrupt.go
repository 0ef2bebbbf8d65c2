package drain

import (
	"time"

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
// has it. Either annotation may also be a positive duration ("1h", as
// Karpenter reads it): the pod keeps its node until it has run that long
// since its start, and for ever while it has not started or the time is
// not known (Context.Now zero). A value that is neither is ignored, as
// Karpenter ignores it. A finished or terminating pod is on its way out
// and asks nothing.
type DoNotDisrupt struct{}

// Name returns the rule's reason.
func (DoNotDisrupt) Name() Reason { return ReasonDoNotDisrupt }

// Check implements Rule.
func (DoNotDisrupt) Check(p *corev1.Pod, c *Context) Outcome {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Outcome{}
	}
	for _, key := range []string{v1alpha1.AnnotationDoNotDisrupt, AnnotationKarpenterDoNotDisrupt} {
		v, ok := p.Annotations[key]
		if !ok || !doNotDisruptActive(p, v, c.Now) {
			continue
		}
		msg := "pod " + podName(p) + " is annotated " + key + ": \"" + v + "\""
		if v != "true" && p.Status.StartTime != nil {
			d, _ := time.ParseDuration(v)
			msg += " (until " + p.Status.StartTime.Add(d).UTC().Format(time.RFC3339) + ")"
		}
		return Outcome{Verdict: Blocks, Reason: ReasonDoNotDisrupt, Message: msg}
	}
	if p.Labels[labelOceanRestrictScaleDown] == "true" {
		return Outcome{Verdict: Blocks, Reason: ReasonDoNotDisrupt,
			Message: "pod " + podName(p) + " is labelled " + labelOceanRestrictScaleDown + ": \"true\""}
	}
	return Outcome{}
}

// doNotDisruptActive reports whether a do-not-disrupt value v protects the
// pod at now: "true", or a positive duration the pod has not run for yet
// (counted from its start; not started or now unknown: protected).
func doNotDisruptActive(p *corev1.Pod, v string, now time.Time) bool {
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	return p.Status.StartTime == nil || now.IsZero() || now.Sub(p.Status.StartTime.Time) < d
}
