package drain

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ReasonControllerNotFound is the reason of a pod whose controller is gone.
const ReasonControllerNotFound Reason = "ControllerNotFound"

// checkedControllers are the controller kinds (by group) whose existence
// berth checks: those a cluster always has. A pod of a custom controller
// counts as replicated without the check (berth cannot know the kind); a
// DaemonSet's pod goes with its node before this rule (GoesWithNode).
var checkedControllers = map[schema.GroupKind]bool{
	{Group: "", Kind: "ReplicationController"}: true,
	{Group: "apps", Kind: "ReplicaSet"}:        true,
	{Group: "apps", Kind: "StatefulSet"}:       true,
	{Group: "batch", Kind: "Job"}:              true,
}

// ControllerExists blocks: a pod whose ReplicaSet, Job, StatefulSet or
// ReplicationController no longer exists (its owner reference names a UID
// no such object has) would not come back once evicted, whatever its
// annotations say; as in Cluster Autoscaler, this is checked before
// safe-to-evict. Off when the controllers are not known.
type ControllerExists struct{}

// Name returns the rule's reason.
func (ControllerExists) Name() Reason { return ReasonControllerNotFound }

// Check implements Rule.
func (ControllerExists) Check(p *corev1.Pod, c *Context) Outcome {
	ref := metav1.GetControllerOfNoCopy(p)
	if c.Controllers == nil || ref == nil {
		return Outcome{}
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || !checkedControllers[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}] || c.Controllers[ref.UID] {
		return Outcome{}
	}
	return Outcome{Verdict: Blocks, Reason: ReasonControllerNotFound,
		Message: "pod " + podName(p) + "'s controller " + ref.Kind + " " + ref.Name + " no longer exists: the pod would not come back once evicted"}
}
