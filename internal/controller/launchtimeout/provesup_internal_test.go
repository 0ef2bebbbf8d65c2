package launchtimeout

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestWhichPodsProveTheirNodeWasUp: a workload's pod whose containers ran
// proves its node was up (TestANodeThatRanPodsIsNotAFailedLaunch); a pod
// that never ran (its start time is written while the sandbox cannot be
// made: Pending, ContainerCreating), one that tolerates the not-ready
// taint (an operator on the host network runs on a node whose network
// never came up), a DaemonSet's agent or a static pod does not. (A review
// found the first two keeping failed launches; KWOK marks the pods of its
// nodes Running, so these cases are not on the API server.)
func TestWhichPodsProveTheirNodeWasUp(t *testing.T) {
	start := metav1.NewTime(time.Now())
	waiting := []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a workload's pod Running", b.Pod("web", b.Phase(corev1.PodRunning)), true},
		{"a job's pod Succeeded", b.Pod("job", b.Phase(corev1.PodSucceeded)), true},
		{"a container that ran and restarts", b.Pod("crash", b.Phase(corev1.PodPending), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
		}), true},
		{"a pod stuck creating, its start time written", b.Pod("stuck", b.Phase(corev1.PodPending), func(p *corev1.Pod) {
			p.Status.StartTime, p.Status.ContainerStatuses = &start, waiting
		}), false},
		{"an operator tolerating every taint, Running", b.Pod("operator", b.Phase(corev1.PodRunning), func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), false},
		{"a pod tolerating not-ready, Running", b.Pod("tolerant", b.Phase(corev1.PodRunning), func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}), false},
		{"a DaemonSet's agent Running", b.Pod("agent", b.Phase(corev1.PodRunning), b.OwnedBy("DaemonSet", "agent")), false},
		{"a static pod's mirror Running", b.Pod("proxy", b.Phase(corev1.PodRunning), func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}), false},
	} {
		if got := provesUp(tt.pod); got != tt.want {
			t.Errorf("%s: proves its node was up %v, want %v", tt.name, got, tt.want)
		}
	}
}
