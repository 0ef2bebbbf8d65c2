package clusterread_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
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
	if len(again.Spec.Template.Spec.Containers[0].Resources.Requests) != 0 || again.Annotations[daemonset.AnnotationAsRun] != "" {
		t.Errorf("the stored DaemonSet changed: %+v", again)
	}
}

// TestADaemonSetWithoutPodsIsReadAsTheAPIServerWillAdmitThem: a
// DaemonSet that runs on no node yet has only its template, to which
// admission adds the container defaults of its namespace's LimitRanges.
// Here two LimitRanges (one with a default request and a default limit
// that becomes a request too; one with a max that becomes a default
// limit, and a Pod item that defaults nothing) and containers that set nothing,
// a limit alone or a request alone. A pod made from the same template is
// admitted by the real API server; both readers must give each container
// of the DaemonSet the requests and limits that pod got. The template
// also names a RuntimeClass with an overhead, a node selector and a
// toleration: the DaemonSet must be read with the overhead and node
// selector the pod got, and without the toleration (the DaemonSet
// controller chooses nodes by the template's).
func TestADaemonSetWithoutPodsIsReadAsTheAPIServerWillAdmitThem(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ds-without-pods"}}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	lrA := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "a-defaults", Namespace: ns.Name}, Spec: corev1.LimitRangeSpec{
		Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, DefaultRequest: rl("cpu", "250m"), Default: rl("memory", "512Mi")}}}}
	lrB := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "b-max", Namespace: ns.Name}, Spec: corev1.LimitRangeSpec{
		Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Max: rl("ephemeral-storage", "2Gi")},
			{Type: corev1.LimitTypePod, Max: rl("cpu", "10")}}}}
	kata := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata-ds-without-pods"}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m", "memory", "160Mi")},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
			Tolerations: []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	template := corev1.PodSpec{
		RuntimeClassName: &kata.Name,
		NodeSelector:     map[string]string{"pool": "none"},
		InitContainers:   []corev1.Container{{Name: "init", Image: "i"}},
		Containers: []corev1.Container{{Name: "bare", Image: "i"},
			{Name: "limited", Image: "i", Resources: corev1.ResourceRequirements{Limits: rl("cpu", "300m")}},
			{Name: "requesting", Image: "i", Resources: corev1.ResourceRequirements{Requests: rl("memory", "64Mi")}}}}
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns.Name}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: *template.DeepCopy()}}}
	for _, o := range []client.Object{ns, lrA, lrB, kata, ds} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), ns)
		_ = env.Client.Delete(context.Background(), kata)
	})
	// A pod of the template that the DaemonSet does not control: what the
	// API server admits, and not a pod berth may read the DaemonSet from.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns.Name}, Spec: *template.DeepCopy()}
	if err := env.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	stored := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ds), stored); err != nil {
		t.Fatal(err)
	}
	same := func(a, b corev1.ResourceList) bool {
		if len(a) != len(b) {
			return false
		}
		for name, q := range a {
			if r, ok := b[name]; !ok || q.Cmp(r) != 0 {
				return false
			}
		}
		return true
	}
	admitted := func(how string, dss []*appsv1.DaemonSet) {
		t.Helper()
		for _, d := range dss {
			if d.Namespace != ns.Name {
				continue
			}
			spec := d.Spec.Template.Spec
			if !same(spec.Overhead, probe.Spec.Overhead) || !maps.Equal(spec.NodeSelector, probe.Spec.NodeSelector) {
				t.Errorf("%s: read with overhead %v and node selector %v, the API server admits %v and %v",
					how, spec.Overhead, spec.NodeSelector, probe.Spec.Overhead, probe.Spec.NodeSelector)
			}
			// The controller makes pods only for nodes the template
			// tolerates: the class's toleration, which admission adds to
			// the pod, must not widen where the DaemonSet is counted.
			if !slices.ContainsFunc(probe.Spec.Tolerations, func(have corev1.Toleration) bool { return have.Key == "kata" }) {
				t.Errorf("the API server admitted the pod without the class's toleration: %v", probe.Spec.Tolerations)
			}
			if slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return have.Key == "kata" }) {
				t.Errorf("%s: read with the class's toleration, which the DaemonSet controller does not choose nodes by", how)
			}
			for i, c := range append(spec.InitContainers, spec.Containers...) {
				want := append(probe.Spec.InitContainers, probe.Spec.Containers...)[i]
				if !same(c.Resources.Requests, want.Resources.Requests) || !same(c.Resources.Limits, want.Resources.Limits) {
					t.Errorf("%s: container %s is read with %v, the API server admits %v", how, c.Name, c.Resources, want.Resources)
				}
			}
			return
		}
		t.Errorf("%s: the DaemonSet was not read", how)
	}
	cl, err := clusterread.Read(ctx, env.Client, clusterread.Parts{})
	if err != nil {
		t.Fatal(err)
	}
	admitted("reading the cluster", cl.DaemonSets)
	alone, err := clusterread.DaemonSetsAsRun(ctx, env.Client, []*appsv1.DaemonSet{stored})
	if err != nil {
		t.Fatal(err)
	}
	admitted("reading the DaemonSets alone", alone)
}
