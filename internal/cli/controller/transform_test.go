package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTrimCachedKeepsWhatBerthReads: the cache drops managedFields,
// container statuses and node images, and keeps what the planners and
// drain rules read (requests, volumes, conditions, labels, capacity).
func TestTrimCachedKeepsWhatBerthReads(t *testing.T) {
	pod := b.Pod("p", b.CPU("1"), b.NodeName("n"), b.Labels("app", "web"))
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "app"}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init"}}
	node := b.Node("n", "4", "16Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "g"))
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/app:1"}, SizeBytes: 1 << 30}}

	out, err := trimCached(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if p.ManagedFields != nil || p.Status.ContainerStatuses != nil || p.Status.InitContainerStatuses != nil {
		t.Errorf("pod kept what berth never reads: managedFields %v, container statuses %v, init %v", p.ManagedFields, p.Status.ContainerStatuses, p.Status.InitContainerStatuses)
	}
	if p.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" || len(p.Spec.Volumes) != 1 || len(p.Status.Conditions) != 1 || p.Labels["app"] != "web" || p.Spec.NodeName != "n" {
		t.Errorf("pod lost what berth reads: %+v", p)
	}
	out, err = trimCached(node)
	if err != nil {
		t.Fatal(err)
	}
	n := out.(*corev1.Node)
	if n.Status.Images != nil {
		t.Errorf("node kept its images: %v", n.Status.Images)
	}
	if n.Labels[v1alpha1.LabelNodeGroup] != "g" || n.Status.Allocatable.Cpu().String() != "4" || len(n.Status.Conditions) != 1 {
		t.Errorf("node lost what berth reads: %+v", n)
	}
}
