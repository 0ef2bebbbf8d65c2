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

// TestPodsAreTheDaemonSetsPodsAsAdmitted: the API server defaults a
// DaemonSet's pods, not its template: a container that only limits cpu
// requests it, and a host-network container's port is a host port.
func TestPodsAreTheDaemonSetsPodsAsAdmitted(t *testing.T) {
	d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}, Spec: appsv1.DaemonSetSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c",
			Ports:     []corev1.ContainerPort{{ContainerPort: 9100, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}}}
	p := daemonset.Pods([]*appsv1.DaemonSet{d})[0]
	if p.Requests.MilliCPU != 3000 {
		t.Errorf("requests %d millicpu, want 3000 (its limit)", p.Requests.MilliCPU)
	}
	if len(p.Ports) != 1 || p.Ports[0].Port != 9100 {
		t.Errorf("host ports %+v, want 9100", p.Ports)
	}
	if _, ok := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; ok {
		t.Error("the DaemonSet's own template was changed")
	}
}
