package clusterread_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestDaemonSetsAreReadAsTheirPodsRun: in a namespace whose LimitRange
// gives 700m of cpu to a container that asks for none, a DaemonSet's
// template asks for none, and its pod, as the API server admitted it,
// for 700m. Reading the cluster (every pod) and reading the DaemonSets
// alone (the pods of their namespaces) both say a new node holds 700m
// for it, on a real API server; the DaemonSet stored is not changed.
func TestDaemonSetsAreReadAsTheirPodsRun(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ds-as-run"}}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns.Name}, Spec: corev1.LimitRangeSpec{
		Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("700m")}}}}}
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns.Name}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "none"}, // no node: the test makes its pod
			Containers:   []corev1.Container{{Name: "agent", Image: "agent"}}}}}}
	for _, o := range []client.Object{ns, lr, ds} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	// Its pod as the DaemonSet controller makes one (of the template's
	// generation, controlled by the DaemonSet), admitted by the API server.
	yes := true
	pod := b.Pod("agent-x", b.Namespace(ns.Name), b.NoUID(), b.Labels("app", "agent", "pod-template-generation", "1"))
	pod.Spec.Containers = []corev1.Container{{Name: "agent", Image: "agent"}}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	stored := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ds), stored); err != nil {
		t.Fatal(err)
	}
	holds := func(how string, dss []*appsv1.DaemonSet) {
		t.Helper()
		for _, d := range daemonset.Pods(dss) {
			if d.DaemonSet.Namespace == ns.Name {
				if d.Requests.MilliCPU != 700 {
					t.Errorf("%s: the DaemonSet holds %dm of cpu on a new node, want its pod's 700m", how, d.Requests.MilliCPU)
				}
				return
			}
		}
		t.Errorf("%s: the DaemonSet was not read", how)
	}
	cl, err := clusterread.Read(ctx, env.Client, clusterread.Parts{})
	if err != nil {
		t.Fatal(err)
	}
	holds("reading the cluster", cl.DaemonSets)
	alone, err := clusterread.DaemonSetsAsRun(ctx, env.Client, []*appsv1.DaemonSet{stored})
	if err != nil {
		t.Fatal(err)
	}
	holds("reading the DaemonSets alone", alone)
	again := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ds), again); err != nil {
		t.Fatal(err)
	}
	if len(again.Spec.Template.Spec.Containers[0].Resources.Requests) != 0 || again.Annotations[daemonset.AnnotationFromPod] != "" {
		t.Errorf("the stored DaemonSet changed: %+v", again)
	}
}
