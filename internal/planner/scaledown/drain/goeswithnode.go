package drain

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/podutil"
)

// ReasonGoesWithNode is the reason of pods that need no new home.
const ReasonGoesWithNode Reason = "GoesWithNode"

// GoesWithNode lets go with the node: DaemonSet pods (their DaemonSet runs one per node; berth's
// per-node reserve is one), mirror pods (static pods of the node) and
// finished pods need no new home. Headroom placeholders are not among
// them: they hold headroom and must fit elsewhere like any pod (berth
// deletes them instead of evicting them).
type GoesWithNode struct{}

// Name returns the rule's reason.
func (GoesWithNode) Name() Reason { return ReasonGoesWithNode }

// Check implements Rule.
func (GoesWithNode) Check(p *corev1.Pod, _ *Context) Outcome {
	if podutil.IsOwnedByDaemonSet(p) || podutil.IsMirror(p) || podutil.IsTerminal(p) {
		return Outcome{Verdict: Stays, Reason: ReasonGoesWithNode}
	}
	return Outcome{}
}
