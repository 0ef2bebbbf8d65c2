package drain

import corev1 "k8s.io/api/core/v1"

// ReasonNotSafeToEvict is the reason of a pod annotated not safe to evict.
const ReasonNotSafeToEvict Reason = "NotSafeToEvict"

// SafeToEvict reads Cluster Autoscaler's annotation: "false" keeps the
// node; "true" lets the pod move even if a later rule (not replicated,
// local storage, kube-system without a PDB) would keep it. A
// PodDisruptionBudget is still respected.
type SafeToEvict struct{}

// Name returns the rule's reason.
func (SafeToEvict) Name() Reason { return ReasonNotSafeToEvict }

// Check implements Rule.
func (SafeToEvict) Check(p *corev1.Pod, c *Context) Outcome {
	switch p.Annotations[annotationSafeToEvict] {
	case "false":
		return Outcome{Verdict: Blocks, Reason: ReasonNotSafeToEvict,
			Message: "pod " + podName(p) + " is annotated " + annotationSafeToEvict + ": \"false\""}
	case "true":
		return DisruptionBudget{}.Check(p, c).orMoves()
	}
	return Outcome{}
}

// orMoves turns an undecided outcome into Moves.
func (o Outcome) orMoves() Outcome {
	if o.Verdict == Undecided {
		return Outcome{Verdict: Moves}
	}
	return o
}
