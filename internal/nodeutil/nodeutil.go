// Package nodeutil answers questions about Node objects that several parts
// of berth ask.
package nodeutil

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Ready reports whether the node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Schedulable reports whether a node is Ready and free of the taints the
// node lifecycle puts on nodes that are not (not-ready, unreachable).
func Schedulable(n *corev1.Node) bool {
	if !Ready(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return true
}

// Disrupted reports whether berth is draining the node: it carries the
// berth.dev/disrupted taint.
func Disrupted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintDisrupted {
			return true
		}
	}
	return false
}

// drainMarks are the annotations a drain writes, besides its taint, and
// the interruption deadline (a drain given up outlived its notice: a
// later notice has a deadline of its own). The removal berth asked a
// provider for (berth.dev/removal-accepted) is not among them: once
// accepted it is not undone.
var drainMarks = []string{
	v1alpha1.AnnotationDisruptionStarted, v1alpha1.AnnotationDisruptionReason,
	v1alpha1.AnnotationReplacedBy, v1alpha1.AnnotationReplacementStarted, v1alpha1.AnnotationReplacementLaunching,
	v1alpha1.AnnotationRemovalWaiting, v1alpha1.AnnotationInterruptionDeadline,
	v1alpha1.AnnotationDrainEmptied, v1alpha1.AnnotationDrainCriticalTurn, v1alpha1.AnnotationDrainVolumesWaited,
	v1alpha1.AnnotationDrainDeletionDelayed,
}

// ExcludedFromLoadBalancers is the value of the label
// node.kubernetes.io/exclude-from-external-load-balancers a drain puts on
// a node that did not carry it: the service controller takes the node out
// of Services' load balancers before its pods are evicted and it goes
// (a value that is not a boolean excludes it), and StopDrain knows the
// label was the drain's.
const ExcludedFromLoadBalancers = "berth"

// ExcludeFromLoadBalancers labels n, in place, to leave the load
// balancers (ExcludedFromLoadBalancers), unless it carries the label
// already (set by someone else, it is theirs).
func ExcludeFromLoadBalancers(n *corev1.Node) {
	if _, ok := n.Labels[corev1.LabelNodeExcludeBalancers]; ok {
		return
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[corev1.LabelNodeExcludeBalancers] = ExcludedFromLoadBalancers
}

// StopDrain takes a drain's marks off n (the berth.dev/disrupted taint,
// the annotations the drain wrote and the load-balancer exclusion it
// added), in place, and reports whether it carried any: the node is then
// an ordinary node again.
func StopDrain(n *corev1.Node) bool {
	before := len(n.Spec.Taints)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintDisrupted })
	marked := len(n.Spec.Taints) != before
	if n.Labels[corev1.LabelNodeExcludeBalancers] == ExcludedFromLoadBalancers {
		delete(n.Labels, corev1.LabelNodeExcludeBalancers)
		marked = true
	}
	for _, a := range drainMarks {
		if _, ok := n.Annotations[a]; ok {
			delete(n.Annotations, a)
			marked = true
		}
	}
	return marked
}

// Standby reports whether the node is a standby node (it carries the
// berth.dev/standby taint): it boots to be suspended, or is suspended.
// Only the standby controller acts on it; nothing is scheduled on it.
func Standby(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintStandby {
			return true
		}
	}
	return false
}

// LeaveStandby takes the standby tier's marks off n (its taint, label and
// berth.dev/standby-for), in place: n is then an ordinary node of its
// group. Whether it is suspended (berth.dev/suspended-at) is the
// caller's to say.
func LeaveStandby(n *corev1.Node) {
	delete(n.Labels, v1alpha1.TaintStandby)
	delete(n.Annotations, v1alpha1.AnnotationStandbyFor)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintStandby })
}

// Suspended reports whether the node is a standby node whose machine is
// suspended, and that may be resumed: not being removed.
func Suspended(n *corev1.Node) bool {
	return Standby(n) && n.Annotations[v1alpha1.AnnotationSuspendedAt] != "" && n.Annotations[v1alpha1.AnnotationStandbyRemoving] == ""
}

// TaintCloudUninitialized is the taint the kubelet sets on a node
// registered with --cloud-provider=external until the cloud controller
// manager has initialized it (k8s.io/cloud-provider/api).
const TaintCloudUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// StartupTaints are the taints a new node of a group carries until it is
// up, and that go away on their own: the group's startup taints (removed
// by the agents that set them up) and the cloud controller manager's
// uninitialized taint. Only their keys and effects are set.
func StartupTaints(ng *v1alpha1.NodeGroup) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(ng.Spec.Template.StartupTaints)+1)
	for _, t := range ng.Spec.Template.StartupTaints {
		out = append(out, corev1.Taint{Key: t.Key, Effect: corev1.TaintEffect(t.Effect)})
	}
	return append(out, corev1.Taint{Key: TaintCloudUninitialized, Effect: corev1.TaintEffectNoSchedule})
}

// startupTaintPrefixes name taints that go away on their own once a node
// is up, whatever its group lists: Cluster Autoscaler's startup taints
// (and their deprecated name, ignore-taint) and the Node Readiness
// Controller's readiness rules (as Karpenter reads them).
// TaintClusterAPIUninitialized (a key, not a prefix) goes too.
var startupTaintPrefixes = []string{
	"startup-taint.cluster-autoscaler.kubernetes.io/",
	"ignore-taint.cluster-autoscaler.kubernetes.io/",
	"readiness.k8s.io/",
}

// TaintClusterAPIUninitialized is the taint Cluster API's kubeadm
// bootstrap puts on a joining node; its Machine controller removes it
// once it has synced the node's labels.
const TaintClusterAPIUninitialized = "node.cluster.x-k8s.io/uninitialized"

// StartupByConvention reports whether a taint goes away on its own once
// the node is up by a convention every node follows: a key of
// startupTaintPrefixes, the route controller's network-unavailable taint
// (the node's routes are not made yet), or Cluster API's uninitialized
// taint.
func StartupByConvention(t corev1.Taint) bool {
	if t.Key == corev1.TaintNodeNetworkUnavailable || t.Key == TaintClusterAPIUninitialized {
		return true
	}
	for _, p := range startupTaintPrefixes {
		if strings.HasPrefix(t.Key, p) {
			return true
		}
	}
	return false
}

// resumeBoot is how long a node resumed from standby counts as booting
// again rather than lost when it is NotReady.
const resumeBoot = 10 * time.Minute

// BootedSince is when a node last began to boot: its creation, or its
// resume from standby (berth.dev/resumed-at) when later.
func BootedSince(n *corev1.Node) time.Time {
	since := n.CreationTimestamp.Time
	if at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationResumedAt]); err == nil && at.After(since) {
		since = at
	}
	return since
}

// Resuming reports whether the node was resumed from standby less than
// resumeBoot ago and is not Ready yet.
func Resuming(n *corev1.Node, now time.Time) bool {
	at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationResumedAt])
	return err == nil && !Ready(n) && now.Sub(at) < resumeBoot
}

// ReplacementLaunching reports whether a replacement may be booting for n
// that no mark names: n carries berth.dev/replacement-launching (written
// before the launch) younger than grace (the max provision time) and no
// replaced-by mark (written after it).
func ReplacementLaunching(n *corev1.Node, now time.Time, grace time.Duration) bool {
	at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationReplacementLaunching])
	return err == nil && n.Annotations[v1alpha1.AnnotationReplacedBy] == "" && now.Sub(at) < grace
}

// ReplacedBy are the names of the nodes launched to replace n
// (berth.dev/replaced-by, comma-separated), none when it is not being
// replaced.
func ReplacedBy(n *corev1.Node) []string {
	v := n.Annotations[v1alpha1.AnnotationReplacedBy]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
