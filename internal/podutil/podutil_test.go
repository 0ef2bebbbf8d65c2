package podutil_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/podutil"
)

func pod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Status: corev1.PodStatus{
		Phase:      corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}},
	}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestClassification(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name                                   string
		pod                                    *corev1.Pod
		awaits, provisionable, bound, terminal bool
	}{
		{name: "a pod the scheduler found no node for awaits one", pod: pod(), awaits: true, provisionable: true},
		{name: "a nominated pod awaits a node but does not trigger a scale-up", pod: pod(func(p *corev1.Pod) { p.Status.NominatedNodeName = "n" }), awaits: true},
		{name: "a pod the scheduler has not tried does not await a node", pod: pod(func(p *corev1.Pod) { p.Status.Conditions = nil })},
		{name: "a pod the scheduler is still binding does not await a node", pod: pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = "SchedulerError"
		})},
		{name: "a gated pod does not await a node", pod: pod(func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}} })},
		{name: "a pod being deleted does not await a node", pod: pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now })},
		{name: "a DaemonSet pod does not await a node", pod: pod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
		})},
		{name: "a pod owned, not controlled, by a DaemonSet awaits a node", pod: pod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}
		}), awaits: true, provisionable: true},
		{name: "a bound pod is bound", pod: pod(func(p *corev1.Pod) { p.Spec.NodeName = "n"; p.Status.Phase = corev1.PodRunning }), bound: true},
		{name: "a finished pod on a node is terminal, not bound", pod: pod(func(p *corev1.Pod) { p.Spec.NodeName = "n"; p.Status.Phase = corev1.PodSucceeded }), terminal: true},
		{name: "a failed pod without a node does not await one", pod: pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), terminal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := [4]bool{podutil.AwaitsNode(tt.pod), podutil.IsProvisionable(tt.pod), podutil.IsBound(tt.pod), podutil.IsTerminal(tt.pod)}
			want := [4]bool{tt.awaits, tt.provisionable, tt.bound, tt.terminal}
			if got != want {
				t.Errorf("awaits, provisionable, bound, terminal = %v, want %v", got, want)
			}
		})
	}
}

func TestMirrorAndNoStatus(t *testing.T) {
	m := pod(func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} })
	if !podutil.IsMirror(m) || podutil.IsMirror(pod()) {
		t.Error("IsMirror does not follow the mirror annotation")
	}
	if !podutil.HasNoStatus(&corev1.Pod{}) || podutil.HasNoStatus(pod()) {
		t.Error("HasNoStatus does not tell a hand-written pod from a reported one")
	}
}

// TestAPodMarkedAsADaemonSetsAwaitsNoNode: as Cluster Autoscaler
// (filter_out_daemon_sets.go, pkg/utils/pod's IsDaemonSetPod), a pod of a
// DaemonSet-like controller of another kind marked
// cluster-autoscaler.kubernetes.io/daemonset-pod: "true" belongs to its
// node: berth plans no node for it, nor for it as part of a burst. berth
// honoured the mark only when draining.
func TestAPodMarkedAsADaemonSetsAwaitsNoNode(t *testing.T) {
	marked := func(value string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{podutil.AnnotationDaemonSetPod: value}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "NodeAgent", Name: "agent", UID: "uid-agent", Controller: ptr.To(true)}}
		})
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		awaits bool
	}{
		{name: "marked true", pod: marked("true")},
		{name: "marked with another value", pod: marked("yes"), awaits: true},
	} {
		got := [3]bool{podutil.AwaitsNode(tc.pod), podutil.IsProvisionable(tc.pod), podutil.NewBurst([]*corev1.Pod{tc.pod}).AwaitsNode(tc.pod)}
		if want := [3]bool{tc.awaits, tc.awaits, tc.awaits}; got != want {
			t.Errorf("%s: awaits, provisionable, awaits in its burst = %v, want %v", tc.name, got, want)
		}
	}
}

// TestIsCritical: the system's critical classes by name, or by the
// priority admission gave the pod (a class of another name at the same
// value, as kube-apiserver reserves it), and nothing below.
func TestIsCritical(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"system-cluster-critical", corev1.PodSpec{PriorityClassName: "system-cluster-critical"}, true},
		{"system-node-critical", corev1.PodSpec{PriorityClassName: "system-node-critical"}, true},
		{"priority 2000000000", corev1.PodSpec{Priority: ptr.To(int32(2_000_000_000))}, true},
		{"priority 1999999999", corev1.PodSpec{PriorityClassName: "high", Priority: ptr.To(int32(1_999_999_999))}, false},
		{"no priority", corev1.PodSpec{}, false},
	} {
		if got := podutil.IsCritical(&corev1.Pod{Spec: tt.spec}); got != tt.want {
			t.Errorf("%s: IsCritical %v, want %v", tt.name, got, tt.want)
		}
	}
}
