package podutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Burst is the set of workload controllers (ReplicaSets, Jobs,
// StatefulSets, any owner marked controller) one of whose pods the
// scheduler found no node for. Their other pods that the scheduler has
// not tried yet await a node as well: in a large cluster kube-scheduler
// takes minutes to try a burst of thousands of pods one by one, and a
// round that planned only the pods marked so far would choose nodes for
// a slice of the burst (small ones, filling a group's maxSize) and leave
// the rest to later rounds. The planner still places such a pod on free
// room first, as the scheduler will.
type Burst map[types.UID]bool

// NewBurst returns the controllers of the pods the scheduler found no
// node for (FailedToSchedule; companion-gated pods were never tried),
// nominated to a node or not: once berth nominates the marked pods to the
// nodes it launched, the pods the controller creates after them are part
// of the same burst.
func NewBurst(pods []*corev1.Pod) Burst {
	var b Burst
	for _, p := range pods {
		if !IsUnbound(p) || IsDaemonSetPod(p) || !FailedToSchedule(p) {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			if b == nil {
				b = Burst{}
			}
			b[ref.UID] = true
		}
	}
	return b
}

// AwaitsNode reports whether berth should find a node for the pod: the
// scheduler found none (AwaitsNode), or it has not tried the pod yet and
// found none for another pod of its controller.
func (b Burst) AwaitsNode(p *corev1.Pod) bool {
	if AwaitsNode(p) {
		return true
	}
	if len(b) == 0 || !NotTried(p) {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && b[ref.UID]
}

// NotTried reports whether the pod waits for the scheduler's first try:
// unbound, without scheduling gates, not a DaemonSet pod, and no
// PodScheduled condition but the one the API server sets on a pod created
// with gates (reason SchedulingGated), which stays until the scheduler
// tries the pod once its gates are removed.
func NotTried(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || len(p.Spec.SchedulingGates) > 0 || !IsUnbound(p) || IsDaemonSetPod(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonSchedulingGated
		}
	}
	return true
}
