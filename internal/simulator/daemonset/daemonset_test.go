package daemonset_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/daemonset"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

func ds(name string, cpu, mem string, selector map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}, Spec: appsv1.DaemonSetSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}}}
}

// TestRemainingIsWhatTheDaemonSetsLeave: on a node of 2 cpu, 4Gi and 110
// pods, two DaemonSets run (one of 1500m and one of 1 cpu, 1Gi each) and
// a third selects other nodes: 0 cpu (never below), 2Gi and 108 pods are
// left; the list given is not changed.
func TestRemainingIsWhatTheDaemonSetsLeave(t *testing.T) {
	node := b.Node("n", "2", "4Gi", b.NodeLabels("pool", "general"))
	node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	before := node.Status.Allocatable.DeepCopy()
	dss := daemonset.Pods([]*appsv1.DaemonSet{ds("a", "1500m", "1Gi", nil), ds("b", "1", "1Gi", map[string]string{"pool": "general"}),
		ds("gpu", "1", "1Gi", map[string]string{"pool": "gpu"})})
	got := daemonset.Remaining(node.Status.Allocatable, dss, node)
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourcePods: resource.MustParse("108")}
	for name, q := range want {
		if g := got[name]; g.Cmp(q) != 0 {
			t.Errorf("%s left: %s, want %s", name, g.String(), q.String())
		}
	}
	if d := cmp.Diff(before, node.Status.Allocatable); d != "" {
		t.Errorf("the allocatable given was changed:\n%s", d)
	}
}
