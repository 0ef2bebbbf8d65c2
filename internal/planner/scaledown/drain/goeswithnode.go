package drain

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/podutil"
)

// ReasonGoesWithNode is the reason of pods that need no new home.
const ReasonGoesWithNode Reason = "GoesWithNode"

// GoesWithNode lets go with the node the pods that need no new home:
// DaemonSet pods (their DaemonSet runs one per node; berth's per-node
// reserve is one) and pods annotated cluster-autoscaler.kubernetes.io/
// daemonset-pod: "true" (DaemonSet-like controllers of other kinds),
// mirror pods (static pods of the node), finished pods, and pods that have
// been terminating longer than their grace period plus
// podutil.LongTerminatingGrace (they are going anyway; waiting for them
// would keep the node for ever). Headroom placeholders are not among them:
// they hold headroom and must fit elsewhere like any pod (berth deletes
// them instead of evicting them).
type GoesWithNode struct{}

// Name returns the rule's reason.
func (GoesWithNode) Name() Reason { return ReasonGoesWithNode }

// Check implements Rule.
func (GoesWithNode) Check(p *corev1.Pod, c *Context) Outcome {
	var now time.Time
	if c != nil {
		now = c.Now
	}
	if podutil.IsDaemonSetPod(p) || podutil.IsMirror(p) ||
		podutil.IsTerminal(p) || podutil.IsLongTerminating(p, now) {
		return Outcome{Verdict: Stays, Reason: ReasonGoesWithNode}
	}
	return Outcome{}
}
