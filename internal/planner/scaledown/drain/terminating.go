package drain

import (
	corev1 "k8s.io/api/core/v1"
)

// ReasonTerminating is the reason of a pod already being deleted.
const ReasonTerminating Reason = "Terminating"

// Terminating moves a pod that is being deleted (and not yet long
// terminating: GoesWithNode lets those go): it is leaving whatever berth
// does, evicted by a drain or deleted by someone else, so nothing that
// makes eviction unsafe applies to it, not a controller gone (a
// Deployment deleted while its pod shuts down), nor the absence of one,
// local storage or a budget. The node waits for it, and its room
// elsewhere is still simulated (its controller may make it again), but
// by the check of a drain under way when its controller has made it
// again already (scaledown.Recheck).
type Terminating struct{}

// Name returns the rule's reason.
func (Terminating) Name() Reason { return ReasonTerminating }

// Check implements Rule.
func (Terminating) Check(p *corev1.Pod, _ *Context) Outcome {
	if p.DeletionTimestamp != nil {
		return Outcome{Verdict: Moves, Reason: ReasonTerminating}
	}
	return Outcome{}
}
