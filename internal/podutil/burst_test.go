package podutil_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

func ownedBy(kind string, uid types.UID) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: string(uid), UID: uid, Controller: ptr.To(true)}}
	}
}

func untried(p *corev1.Pod) { p.Status.Conditions = nil }

// TestABurstAwaitsANodeWhole: once the scheduler found no node for one pod
// of a controller, the controller's pods the scheduler has not tried yet
// await a node too; nothing else does.
func TestABurstAwaitsANodeWhole(t *testing.T) {
	marked := pod(ownedBy("ReplicaSet", "web"))
	burst := podutil.NewBurst([]*corev1.Pod{marked,
		pod(ownedBy("ReplicaSet", "nominated"), func(p *corev1.Pod) { p.Status.NominatedNodeName = "n" }),
		pod(untried, ownedBy("ReplicaSet", "untried")),
		pod(ownedBy("ReplicaSet", "companion"), func(p *corev1.Pod) {
			p.Status.Conditions = nil
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
			p.Annotations = map[string]string{v1alpha1.AnnotationCompanionRequests: `{"cpu":"100m"}`}
		}),
		pod(ownedBy("DaemonSet", "ds")),
		pod(ownedBy("ReplicaSet", "deleted"), func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }),
		pod(ownedBy("ReplicaSet", "owned"), func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }),
	})
	for _, tt := range []struct {
		name   string
		pod    *corev1.Pod
		awaits bool
	}{
		{name: "the pod the scheduler found no node for", pod: marked, awaits: true},
		{name: "an untried pod of its ReplicaSet", pod: pod(untried, ownedBy("ReplicaSet", "web")), awaits: true},
		{name: "an untried pod of a ReplicaSet whose marked pod is nominated", pod: pod(untried, ownedBy("ReplicaSet", "nominated")), awaits: true},
		{name: "a pod of its ReplicaSet whose gates were removed, not tried since", pod: pod(ownedBy("ReplicaSet", "web"), func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
		}), awaits: true},
		{name: "an untried pod of another ReplicaSet", pod: pod(untried, ownedBy("ReplicaSet", "other"))},
		{name: "an untried pod of a ReplicaSet none of whose pods was tried", pod: pod(untried, ownedBy("ReplicaSet", "untried"))},
		{name: "an untried pod of a ReplicaSet whose only waiting pod is companion-gated (never tried)", pod: pod(untried, ownedBy("ReplicaSet", "companion"))},
		{name: "an untried pod of a DaemonSet one of whose pods was marked", pod: pod(untried, ownedBy("DaemonSet", "ds"))},
		{name: "an untried pod of a ReplicaSet whose marked pod is being deleted", pod: pod(untried, ownedBy("ReplicaSet", "deleted"))},
		{name: "an untried pod of an owner that is not its controller", pod: pod(untried, ownedBy("ReplicaSet", "owned"))},
		{name: "an untried pod without a controller", pod: pod(untried)},
		{name: "a pod of its ReplicaSet the scheduler failed on with an error", pod: pod(ownedBy("ReplicaSet", "web"), func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = "SchedulerError"
		})},
		{name: "a gated pod of its ReplicaSet", pod: pod(untried, ownedBy("ReplicaSet", "web"), func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}}
		})},
		{name: "a bound pod of its ReplicaSet", pod: pod(untried, ownedBy("ReplicaSet", "web"), func(p *corev1.Pod) { p.Spec.NodeName = "n" })},
		{name: "a pod of its ReplicaSet being deleted", pod: pod(untried, ownedBy("ReplicaSet", "web"), func(p *corev1.Pod) {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := burst.AwaitsNode(tt.pod); got != tt.awaits {
				t.Errorf("awaits a node = %v, want %v", got, tt.awaits)
			}
		})
	}
	if podutil.NewBurst(nil).AwaitsNode(pod(untried, ownedBy("ReplicaSet", "web"))) {
		t.Error("with no pod marked, an untried pod awaits a node")
	}
}
