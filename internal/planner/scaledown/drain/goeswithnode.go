package drain

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// ReasonGoesWithNode is the reason of pods that need no new home.
const ReasonGoesWithNode Reason = "GoesWithNode"

// GoesWithNode: DaemonSet pods (their DaemonSet runs one per node), mirror
// pods (static pods of the node), finished pods, and berth's placeholder
// and per-node reserve pods (placeholders are planned again, the reserve
// goes with its node) need no new home.
type GoesWithNode struct{}

// Name returns the rule's reason.
func (GoesWithNode) Name() Reason { return ReasonGoesWithNode }

// Check implements Rule.
func (GoesWithNode) Check(p *corev1.Pod, _ *Context) Outcome {
	if podutil.IsOwnedByDaemonSet(p) || podutil.IsMirror(p) || podutil.IsTerminal(p) || p.Labels[v1alpha1.LabelHeadroomRole] != "" {
		return Outcome{Verdict: Stays, Reason: ReasonGoesWithNode}
	}
	return Outcome{}
}
