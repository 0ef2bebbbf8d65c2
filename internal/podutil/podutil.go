// Package podutil says what a pod is, once, for the planner, the
// controllers and the `berth plan` loader: bound or waiting, waiting for a
// node berth should find, a DaemonSet or mirror pod, finished. It is pure
// (API types only), as Karpenter's pkg/utils/pod is.
package podutil

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// IsTerminal reports whether the pod has finished (Succeeded or Failed):
// it uses no node capacity.
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// IsBound reports whether the pod is on a node and uses its capacity.
func IsBound(p *corev1.Pod) bool { return p.Spec.NodeName != "" && !IsTerminal(p) }

// IsOwnedByDaemonSet reports whether a DaemonSet controls the pod: it
// belongs to one node and never makes berth launch one.
func IsOwnedByDaemonSet(p *corev1.Pod) bool { return DaemonSetOf(p) != nil }

// AnnotationDaemonSetPod set to "true" marks a pod of a DaemonSet-like
// controller of another kind (Cluster Autoscaler's
// cluster-autoscaler.kubernetes.io/daemonset-pod): it belongs to its node.
const AnnotationDaemonSetPod = "cluster-autoscaler.kubernetes.io/daemonset-pod"

// IsDaemonSetPod reports whether the pod belongs to one node: a
// DaemonSet controls it, or it is marked AnnotationDaemonSetPod. berth
// never launches a node for it, and it goes with its node.
func IsDaemonSetPod(p *corev1.Pod) bool {
	return IsOwnedByDaemonSet(p) || p.Annotations[AnnotationDaemonSetPod] == "true"
}

// DaemonSetOf is the reference to the DaemonSet that controls the pod, nil
// when none does. It is the pod's own: do not change it.
func DaemonSetOf(p *corev1.Pod) *metav1.OwnerReference {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == "DaemonSet" {
		return ref
	}
	return nil
}

// IsMirror reports whether the pod is the API mirror of a static pod.
func IsMirror(p *corev1.Pod) bool {
	_, ok := p.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// IsCritical reports whether a pod is of the system's critical priority
// classes (system-cluster-critical, system-node-critical), by class name
// or by the priority admission gave it (2,000,000,000 and above is kept
// for them): a node's drain evicts such pods last.
func IsCritical(p *corev1.Pod) bool {
	switch p.Spec.PriorityClassName {
	case "system-cluster-critical", "system-node-critical":
		return true
	}
	return p.Spec.Priority != nil && *p.Spec.Priority >= systemCriticalPriority
}

// systemCriticalPriority is the lowest priority of the system's critical
// classes (kube-apiserver's scheduling.SystemCriticalPriority).
const systemCriticalPriority = 2_000_000_000

// IsUnbound reports whether the pod waits to be bound: no node, not gated,
// not being deleted, not finished.
func IsUnbound(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && (len(p.Spec.SchedulingGates) == 0 || IsCompanionGated(p)) && p.DeletionTimestamp == nil &&
		(p.Status.Phase == corev1.PodPending || p.Status.Phase == "")
}

// IsCompanionGated reports whether the pod is held only by berth's
// companion gate and carries its companion's requests: berth plans it,
// with room for the companion, and removes the gate once that room is
// held. It counts as unbound, waiting for a node.
func IsCompanionGated(p *corev1.Pod) bool {
	g := p.Spec.SchedulingGates
	_, annotated := p.Annotations[v1alpha1.AnnotationCompanionRequests]
	return len(g) == 1 && g[0].Name == v1alpha1.SchedulingGateCompanion && annotated && p.Spec.NodeName == ""
}

// FailedToSchedule reports whether the scheduler tried the pod and found
// no node (PodScheduled=False, reason Unschedulable).
func FailedToSchedule(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// HasNoStatus reports whether the pod carries no status at all: a pod
// written by hand for `berth plan`, which no scheduler has seen.
func HasNoStatus(p *corev1.Pod) bool {
	return p.Status.Phase == "" && len(p.Status.Conditions) == 0
}

// AwaitsNode reports whether berth should find a node for the pod: it is
// unbound, not a DaemonSet pod (IsDaemonSetPod), and the scheduler found
// no node for it.
// A nomination (by preemption, or by berth for a node it launched) is not
// looked at here; see IsProvisionable.
func AwaitsNode(p *corev1.Pod) bool {
	return IsUnbound(p) && !IsDaemonSetPod(p) && (FailedToSchedule(p) || IsCompanionGated(p))
}

// IsProvisionable reports whether a pod should trigger a scale-up now:
// it awaits a node and is not nominated to one.
func IsProvisionable(p *corev1.Pod) bool {
	return AwaitsNode(p) && p.Status.NominatedNodeName == ""
}

// LongTerminatingGrace is how long past its grace period a pod being
// deleted counts as still terminating (Cluster Autoscaler's
// PodLongTerminatingExtraThreshold).
const LongTerminatingGrace = 30 * time.Second

// IsLongTerminating reports whether the pod has been terminating for
// longer than its grace period (30 s when unset) plus
// LongTerminatingGrace at now: it is going, whatever keeps it, and holds
// no capacity a plan should count on. A zero now says no.
func IsLongTerminating(p *corev1.Pod, now time.Time) bool {
	if p.DeletionTimestamp == nil || now.IsZero() {
		return false
	}
	return TerminatingUntil(p).Before(now)
}

// TerminatingUntil is when a pod being deleted becomes long terminating
// (IsLongTerminating): its deletion timestamp plus its grace period (30 s
// when unset) plus LongTerminatingGrace. Zero for a pod not being deleted.
func TerminatingUntil(p *corev1.Pod) time.Time {
	if p.DeletionTimestamp == nil {
		return time.Time{}
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	return p.DeletionTimestamp.Add(time.Duration(grace)*time.Second + LongTerminatingGrace)
}

// HeldOn is a copy of pod p bound to node: a pod nominated there (by
// preemption, or by berth) holds its room there in a plan as if bound.
func HeldOn(p *corev1.Pod, node string) *corev1.Pod {
	held := p.DeepCopy()
	held.Spec.NodeName = node
	return held
}

// VolumeClaim names the PersistentVolumeClaim a volume of the pod uses: a
// persistentVolumeClaim's, or the one the ephemeral volume controller
// makes for a generic ephemeral volume (<pod>-<volume>); false for other
// volumes.
func VolumeClaim(pod *corev1.Pod, v *corev1.Volume) (types.NamespacedName, bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return types.NamespacedName{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, true
	case v.Ephemeral != nil:
		return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name + "-" + v.Name}, true
	}
	return types.NamespacedName{}, false
}
