package nodegroup

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/state"
)

// nodesByState counts the group's nodes by where they are in their life,
// as the disruption path sees them (the same lifecycle rules;
// maxProvision is the controller's --max-provision-time).
func nodesByState(ng *v1alpha1.NodeGroup, nodes []corev1.Node, now time.Time, maxProvision time.Duration) v1alpha1.NodesByState {
	var out v1alpha1.NodesByState
	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp != nil {
			continue
		}
		switch {
		case nodeutil.Suspended(n):
			out.Standby++
			continue // the standby controller's: no lifecycle
		case nodeutil.Ready(n):
			out.Ready++
		case n.Labels[v1alpha1.LabelInitialized] == "true":
			out.NotReady++
		default:
			out.Launching++
		}
		if nodeutil.Disrupted(n) {
			out.Draining++
		}
		if n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(ng.UID) {
			continue // not berth's: no lifecycle
		}
		if lifecycle.Interrupted(ng, n, now) != nil {
			out.Interrupted++
		}
		if lifecycle.Drifted(ng, n) != nil || lifecycle.Rebalance(ng, n) != nil {
			out.Drifted++
		}
		if lifecycle.Expired(ng, n, now) != nil {
			out.Expired++
		}
		if lifecycle.Unhealthy(ng, n, now, maxProvision) != nil {
			out.Unhealthy++
		}
	}
	return out
}

// scaleEvent is the status form of an event, or keep when there is none.
func scaleEvent(e *state.ScaleEvent, keep *v1alpha1.ScaleEvent) *v1alpha1.ScaleEvent {
	if e == nil {
		return keep
	}
	msg := e.Message
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	return &v1alpha1.ScaleEvent{Time: metav1.NewTime(e.Time.Truncate(time.Second)), Node: e.Node, Reason: e.Reason, Message: msg}
}
