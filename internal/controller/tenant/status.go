package tenant

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// observed is what the reconciler found of a tenant's pod.
type observed struct {
	// pod is the tenant's newest live pod, nil if none.
	pod *corev1.Pod
	// nodeGroup is the node group label of the pod's node.
	nodeGroup string
	// scaleUp is berth's latest scale-up event about the pending pod
	// (TriggeredScaleUp or NotTriggerScaleUp), nil if none.
	scaleUp *eventsv1.Event
	// waiting says why the bound pod's container does not run (its
	// waiting reason and message, such as CreateContainerConfigError: a
	// secret not found), "" when it runs or nothing is said.
	waiting string
	// noPod says why the Deployment makes no pod (its ReplicaFailure
	// condition: a quota, Pod Security, an admission policy refused it),
	// "" when nothing is said.
	noPod string
}

// podStatus derives the tenant's phase, node and conditions from what was
// observed of its pod. It only writes into status.
func podStatus(t *v1alpha1.Tenant, o observed, status *v1alpha1.TenantStatus) {
	status.NodeName, status.NodeGroup = "", ""
	scheduled := metav1.Condition{Type: v1alpha1.ConditionScheduled, Status: metav1.ConditionFalse, ObservedGeneration: t.Generation}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: t.Generation}
	switch {
	case o.pod == nil:
		status.Phase = v1alpha1.TenantPending
		scheduled.Reason, scheduled.Message = v1alpha1.ReasonWaitingForPod, "waiting for the Deployment to create the tenant's pod"
		if o.noPod != "" {
			scheduled.Message += ": " + o.noPod
		}
	case o.pod.Spec.NodeName == "":
		status.Phase = v1alpha1.TenantPending
		scheduled.Reason, scheduled.Message = pendingReason(o)
		if prev := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionScheduled); o.scaleUp == nil && prev != nil &&
			(prev.Reason == v1alpha1.ReasonLaunchingNode || prev.Reason == v1alpha1.ReasonNoNodeCanBeLaunched) &&
			strings.HasPrefix(prev.Message, "pod "+o.pod.Name+": ") {
			// berth reports once per pod and the API server expires events
			// (an hour by default): what it said about this pod stands.
			scheduled.Reason, scheduled.Message = prev.Reason, prev.Message
		}
		if scheduled.Reason == v1alpha1.ReasonLaunchingNode {
			status.Phase = v1alpha1.TenantProvisioning
		}
	default:
		status.NodeName, status.NodeGroup = o.pod.Spec.NodeName, o.nodeGroup
		scheduled.Status, scheduled.Reason = metav1.ConditionTrue, v1alpha1.ReasonPodScheduled
		scheduled.Message = fmt.Sprintf("pod %s runs on node %s (node group %s)", o.pod.Name, o.pod.Spec.NodeName, o.nodeGroup)
		status.Phase = v1alpha1.TenantProvisioning
	}
	ready.Reason, ready.Message = scheduled.Reason, scheduled.Message
	if scheduled.Status == metav1.ConditionTrue {
		ready.Reason, ready.Message = v1alpha1.ReasonPodNotReady, fmt.Sprintf("pod %s is not Ready yet", o.pod.Name)
		if o.waiting != "" {
			ready.Message += ": " + o.waiting
		}
		if podReady(o.pod) {
			status.Phase = v1alpha1.TenantRunning
			ready.Status, ready.Reason = metav1.ConditionTrue, v1alpha1.ReasonPodReady
			ready.Message = fmt.Sprintf("pod %s runs and is Ready on node %s", o.pod.Name, o.pod.Spec.NodeName)
		}
	}
	meta.SetStatusCondition(&status.Conditions, scheduled)
	meta.SetStatusCondition(&status.Conditions, ready)
}

// pendingReason is what berth says about a pending pod: the latest
// scale-up event the provisioner recorded on it, or the scheduler's
// condition while berth has said nothing.
func pendingReason(o observed) (string, string) {
	if e := o.scaleUp; e != nil {
		switch e.Reason {
		case v1alpha1.EventReasonTriggeredScaleUp:
			return v1alpha1.ReasonLaunchingNode, "pod " + o.pod.Name + ": " + e.Note
		case v1alpha1.EventReasonNotTriggerScaleUp:
			return v1alpha1.ReasonNoNodeCanBeLaunched, "pod " + o.pod.Name + ": " + e.Note
		}
	}
	msg := "pod " + o.pod.Name + " waits for the scheduler"
	if c := podCondition(o.pod, corev1.PodScheduled); c != nil && c.Message != "" {
		msg += ": " + c.Message
	}
	return v1alpha1.ReasonWaitingForScheduler, msg
}

// latestScaleUp returns the newest of berth's scale-up events about pod.
func latestScaleUp(pod *corev1.Pod, evs []eventsv1.Event) *eventsv1.Event {
	var best *eventsv1.Event
	var bestAt time.Time
	for i := range evs {
		e := &evs[i]
		if e.Regarding.UID != pod.UID || (e.Reason != v1alpha1.EventReasonTriggeredScaleUp && e.Reason != v1alpha1.EventReasonNotTriggerScaleUp) {
			continue
		}
		if at := podutil.EventTime(e); best == nil || at.After(bestAt) {
			best, bestAt = e, at
		}
	}
	return best
}

func podReady(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodReady)
	return p.Status.Phase == corev1.PodRunning && c != nil && c.Status == corev1.ConditionTrue
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// failed sets the Failed phase and both conditions to reason and message.
func failed(t *v1alpha1.Tenant, status *v1alpha1.TenantStatus, reason, message string) {
	status.Phase, status.NodeName, status.NodeGroup = v1alpha1.TenantFailed, "", ""
	for _, typ := range []string{v1alpha1.ConditionScheduled, v1alpha1.ConditionReady} {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionFalse,
			Reason: reason, Message: message, ObservedGeneration: t.Generation})
	}
}
