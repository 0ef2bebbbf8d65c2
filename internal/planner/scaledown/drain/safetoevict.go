package drain

import corev1 "k8s.io/api/core/v1"

// ReasonNotSafeToEvict is the reason of a pod annotated not safe to evict
// (or safe to evict only once it completes).
const ReasonNotSafeToEvict Reason = "NotSafeToEvict"

// SafeToEvict reads Cluster Autoscaler's annotation
// cluster-autoscaler.kubernetes.io/safe-to-evict: "true" lets the pod move
// even if a later rule (not replicated, local storage, kube-system without
// a PDB) would keep it; "false" keeps the node; "on-completion" keeps it
// while the pod runs (a finished pod goes with the node, see
// GoesWithNode). Unlike Cluster Autoscaler, "true" does not skip the
// PodDisruptionBudget: berth plans only evictions the Eviction API will
// accept, so a budget that allows none keeps the node this round instead
// of starting a drain that would wait.
type SafeToEvict struct{}

// Name returns the rule's reason.
func (SafeToEvict) Name() Reason { return ReasonNotSafeToEvict }

// Check implements Rule.
func (SafeToEvict) Check(p *corev1.Pod, c *Context) Outcome {
	switch v := p.Annotations[annotationSafeToEvict]; v {
	case "false", "on-completion":
		return Outcome{Verdict: Blocks, Reason: ReasonNotSafeToEvict,
			Message: "pod " + podName(p) + " is annotated " + annotationSafeToEvict + ": \"" + v + "\"", Finishes: v == "on-completion"}
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
