package capacitybuffer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/controller/capacitybuffer"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func reconcileBuffer(t *testing.T, r *capacitybuffer.Reconciler, name string) *cbv1beta1.CapacityBuffer {
	t.Helper()
	key := client.ObjectKey{Namespace: "default", Name: name}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	cb := &cbv1beta1.CapacityBuffer{}
	if err := env.Client.Get(context.Background(), key, cb); err != nil {
		t.Fatal(err)
	}
	return cb
}

func i32(v int32) *int32 { return &v }

// TestBufferTranslation: each kind of buffer gets the status a user (and
// Cluster Autoscaler tooling) expects, and broken ones say what is wrong.
func TestBufferTranslation(t *testing.T) {
	ctx := context.Background()
	pod := b.Pod("chunk", b.CPU("1"), b.Memory("1Gi"))
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "default"},
		Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
	replicas := int32(6)
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod.Spec}}}
	other := "example.com/other"
	for _, o := range []client.Object{pt, web,
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "from-template", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: i32(3)}},
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "from-deployment", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: i32(50)}},
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "missing-template", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "nope"}, Replicas: i32(1)}},
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "other-strategy", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{ProvisioningStrategy: &other, PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: i32(1)}},
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: i32(0)}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ready := state.NewReadiness()
	ready.Set(map[state.Key]int32{state.BufferKey("default", "from-template"): 2})
	r := &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: ready, Recorder: &fakes.Recorder{}}

	cb := reconcileBuffer(t, r, "from-template")
	if cb.Status.Replicas == nil || *cb.Status.Replicas != 3 || cb.Status.PodTemplateRef.Name != "chunk" {
		t.Errorf("from-template status %+v", cb.Status)
	}
	if c := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ConditionProvisioning); c == nil || c.Status != metav1.ConditionTrue ||
		c.Message != "berth keeps 3 chunks; 2 fit in free capacity now" {
		t.Errorf("Provisioning condition %+v", c)
	}

	cb = reconcileBuffer(t, r, "from-deployment")
	if cb.Status.Replicas == nil || *cb.Status.Replicas != 3 || cb.Status.PodTemplateRef == nil ||
		!meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) {
		t.Fatalf("from-deployment status %+v", cb.Status)
	}
	owned := &corev1.PodTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: cb.Status.PodTemplateRef.Name}, owned); err != nil {
		t.Fatal(err)
	}
	if owned.Template.Labels["app"] != "web" || !metav1.IsControlledBy(owned, cb) {
		t.Errorf("the buffer's PodTemplate %+v is not the Deployment's template owned by the buffer", owned.ObjectMeta)
	}
	if meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionProvisioning) {
		t.Errorf("Provisioning is True before berth planned for the buffer")
	}

	cb = reconcileBuffer(t, r, "missing-template")
	if c := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != capacitybuffer.ReasonTemplateNotFound || cb.Status.Replicas != nil {
		t.Errorf("missing-template: condition %+v replicas %v, want False/%s and no replicas", c, cb.Status.Replicas, capacitybuffer.ReasonTemplateNotFound)
	}
	// A strategy berth does not serve is another autoscaler's (Cluster
	// Autoscaler's strategy filter): berth writes nothing to it (it wrote
	// its own verdict over the other's).
	if cb = reconcileBuffer(t, r, "other-strategy"); len(cb.Status.Conditions) != 0 || cb.Status.Replicas != nil || cb.Status.ProvisioningStrategy != nil {
		t.Errorf("other-strategy: status %+v, want none written", cb.Status)
	}
	// An empty buffer is not provisioning (Cluster Autoscaler's BufferIsEmpty).
	cb = reconcileBuffer(t, r, "empty")
	if c := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ConditionProvisioning); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != capacitybuffer.ReasonBufferIsEmpty {
		t.Errorf("empty: Provisioning %+v, want False/%s", c, capacitybuffer.ReasonBufferIsEmpty)
	}
}

// TestAChunkThatOnlyLimitsRequestsItsLimits (Cluster Autoscaler's
// defaulting: container limits imply requests): a PodTemplate whose
// container sets limits alone is counted as the API server admits its
// pods: 10 cpu of limits hold ten 1-cpu chunks (berth found the chunk
// requested nothing and said InvalidSpec).
func TestAChunkThatOnlyLimitsRequestsItsLimits(t *testing.T) {
	ctx := context.Background()
	pod := b.Pod("limits-only", b.CPU("1"))
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "limits-only", Namespace: "default"}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
	limits := cbv1beta1.ResourceList{"cpu": resource.MustParse("10")}
	cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "limits-only", Namespace: "default"},
		Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "limits-only"}, Limits: &limits}}
	for _, o := range []client.Object{pt, cb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	r := &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: state.NewReadiness(), Recorder: &fakes.Recorder{}}
	if got := reconcileBuffer(t, r, "limits-only"); got.Status.Replicas == nil || *got.Status.Replicas != 10 {
		t.Errorf("status %+v, want 10 chunks", got.Status)
	}
}

// installWidgets installs a custom resource with a scale subresource whose
// selector is in status, as rollouts and other workload operators have.
func installWidgets(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	obj := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	integer, str := obj("type", "integer"), obj("type", "string")
	crd := &unstructured.Unstructured{Object: obj(
		"apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition",
		"metadata", obj("name", "widgets.example.berth.dev"),
		"spec", obj("group", "example.berth.dev", "scope", "Namespaced",
			"names", obj("plural", "widgets", "singular", "widget", "kind", "Widget", "listKind", "WidgetList"),
			"versions", []any{obj("name", "v1", "served", true, "storage", true,
				"schema", obj("openAPIV3Schema", obj("type", "object", "properties", obj(
					"spec", obj("type", "object", "properties", obj("replicas", integer)),
					"status", obj("type", "object", "properties", obj("replicas", integer, "selector", str))))),
				"subresources", obj("status", obj(), "scale", obj(
					"specReplicasPath", ".spec.replicas", "statusReplicasPath", ".status.replicas", "labelSelectorPath", ".status.selector")))}),
	)}
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		w := &unstructured.UnstructuredList{}
		w.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.berth.dev", Version: "v1", Kind: "WidgetList"})
		err := env.Client.List(ctx, w, client.InNamespace("default"))
		return err == nil, fmt.Sprintf("widgets not served yet: %v", err), nil
	})
}

func widget(t *testing.T, name string, replicas int64, selector string) {
	t.Helper()
	ctx := context.Background()
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.berth.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"replicas": replicas},
	}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Object["status"] = map[string]any{"replicas": int64(0), "selector": selector}
	if err := env.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
}

func readyCondition(cb *cbv1beta1.CapacityBuffer) *metav1.Condition {
	return meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning)
}

// withEnv gives a pod's container an environment variable.
func withEnv(p *corev1.Pod) *corev1.Pod {
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	return p
}

// trimmingClient is env.Client whose pod lists lose their containers'
// images and environment, as the manager's cache keeps them.
func trimmingClient(t *testing.T) client.Client {
	t.Helper()
	return interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if pods, ok := list.(*corev1.PodList); ok {
				for i := range pods.Items {
					for j := range pods.Items[i].Spec.Containers {
						pods.Items[i].Spec.Containers[j].Image, pods.Items[i].Spec.Containers[j].Env = "", nil
					}
				}
			}
			return nil
		},
	})
}

// TestBufferFromAnyScalableKind: a buffer may follow a Job (its
// parallelism) or any kind with a scale subresource, whose newest pod gives
// the chunk's shape; kinds that cannot be scaled, and missing objects, are
// reported in the buffer's condition.
func TestBufferFromAnyScalableKind(t *testing.T) {
	ctx := context.Background()
	installWidgets(t)
	widget(t, "w", 4, "app=widget")
	parallelism := int32(4)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "default"}, Spec: batchv1.JobSpec{
		Parallelism: &parallelism, Suspend: ptr.To(true),
		Template: corev1.PodTemplateSpec{Spec: b.Pod("x", b.CPU("3")).Spec}}}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	buffer := func(name, group, kind, target string) *cbv1beta1.CapacityBuffer {
		return &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: group, Kind: kind, Name: target}, Percentage: i32(50)}}
	}
	for _, o := range []client.Object{job,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}},
		buffer("from-widget", "example.berth.dev", "Widget", "w"),
		buffer("from-job", "batch", "Job", "batch"),
		buffer("missing-widget", "example.berth.dev", "Widget", "nope"),
		buffer("not-scalable", "core", "ConfigMap", "settings"),
		buffer("unknown-kind", "example.berth.dev", "Gadget", "g"),
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The manager's cache keeps no container images or environment: a
	// client that drops them stands for it, and the shape is read past it.
	r := &capacitybuffer.Reconciler{Client: trimmingClient(t), PodReader: env.Client, Ready: state.NewReadiness(), Recorder: &fakes.Recorder{}}

	cb := reconcileBuffer(t, r, "from-job")
	if cb.Status.Replicas == nil || *cb.Status.Replicas != 2 || !meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) {
		t.Errorf("from-job: replicas %v, condition %+v; want 2 (50%% of parallelism 4)", cb.Status.Replicas, readyCondition(cb))
	}

	// The Job completes: its parallelism stays set, and it runs nothing
	// more; the buffer keeps no room for it.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	job.Spec.Suspend = ptr.To(false)
	if err := env.Client.Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	cb = reconcileBuffer(t, r, "from-job")
	if cb.Status.Replicas == nil || *cb.Status.Replicas != 0 {
		t.Errorf("from-job after the Job completed: replicas %d, want 0", ptr.Deref(cb.Status.Replicas, -1))
	}

	cb = reconcileBuffer(t, r, "from-widget")
	if c := readyCondition(cb); c == nil || c.Status != metav1.ConditionFalse || c.Reason != capacitybuffer.ReasonNoPodToCopy {
		t.Errorf("from-widget before any pod: condition %+v, want False/%s", c, capacitybuffer.ReasonNoPodToCopy)
	}
	for _, p := range []*corev1.Pod{
		b.Pod("widget-a", b.Namespace("default"), b.NoUID(), b.Labels("app", "widget"), b.CPU("1"), b.NodeName("gone")),
		withEnv(b.Pod("widget-b", b.Namespace("default"), b.NoUID(), b.Labels("app", "widget"), b.CPU("2"), b.NodeName("gone"))),
	} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	cb = reconcileBuffer(t, r, "from-widget")
	if cb.Status.Replicas == nil || *cb.Status.Replicas != 2 || cb.Status.PodTemplateRef == nil {
		t.Fatalf("from-widget: replicas %v, condition %+v; want 2 (50%% of 4)", cb.Status.Replicas, readyCondition(cb))
	}
	owned := &corev1.PodTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: cb.Status.PodTemplateRef.Name}, owned); err != nil {
		t.Fatal(err)
	}
	spec := owned.Template.Spec
	if cpu := spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "2" || spec.NodeName != "" || owned.Template.Labels["app"] != "widget" {
		t.Errorf("chunk template: cpu %s, node %q, labels %v; want the newest pod's 2 cpu, no node, app=widget", cpu, spec.NodeName, owned.Template.Labels)
	}
	if c := spec.Containers[0]; c.Image == "" || len(c.Env) != 1 {
		t.Errorf("chunk template container %+v: want the newest pod's image and environment", c)
	}
	// With no pod left, the shape copied before is kept.
	if err := env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.MatchingLabels{"app": "widget"}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		err := env.Client.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": "widget"})
		return err == nil && len(pods.Items) == 0, fmt.Sprintf("%d widget pods left", len(pods.Items)), err
	})
	if cb = reconcileBuffer(t, r, "from-widget"); !meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) {
		t.Errorf("from-widget after its pods went: condition %+v, want the copied shape kept", readyCondition(cb))
	}

	for name, reason := range map[string]string{
		"missing-widget": capacitybuffer.ReasonScalableNotFound,
		"not-scalable":   capacitybuffer.ReasonUnsupportedScalable,
		"unknown-kind":   capacitybuffer.ReasonUnsupportedScalable,
	} {
		cb = reconcileBuffer(t, r, name)
		if c := readyCondition(cb); c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || cb.Status.Replicas != nil {
			t.Errorf("%s: condition %+v, replicas %v; want False/%s and no replicas", name, c, cb.Status.Replicas, reason)
		} else {
			t.Logf("%s: %s", name, c.Message)
		}
	}
}

// TestBuffersShareTheirNamespacesQuota: a namespace with a quota of 4 cpu
// creates two buffers of 3 one-cpu chunks each: together they keep 4, not
// 6; a quota scoped to another priority class bounds neither.
func TestBuffersShareTheirNamespacesQuota(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quota-shared"}}
	pod := b.Pod("chunk", b.CPU("1"))
	objs := []client.Object{ns,
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: ns.Name}, Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("4")}}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "critical-only", Namespace: ns.Name}, Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{"pods": resource.MustParse("0")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"system-cluster-critical"}}}}}},
		&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: ns.Name}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}},
	}
	for _, name := range []string{"first", "second"} {
		objs = append(objs, &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: i32(3)}})
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		q := &corev1.ResourceQuota{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "cpu"}, q)
		return err == nil && q.Status.Hard != nil, "the quota controller has not filled the quota's status", err
	})
	r := &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: state.NewReadiness(), Recorder: &fakes.Recorder{}}
	total := int32(0)
	for range 2 { // twice: each sees what the other keeps
		total = 0
		for _, name := range []string{"first", "second"} {
			key := client.ObjectKey{Namespace: ns.Name, Name: name}
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			cb := &cbv1beta1.CapacityBuffer{}
			if err := env.Client.Get(ctx, key, cb); err != nil {
				t.Fatal(err)
			}
			if cb.Status.Replicas != nil {
				total += *cb.Status.Replicas
			}
		}
	}
	if total != 4 {
		t.Errorf("the two buffers keep %d one-cpu chunks under a 4-cpu quota, want 4", total)
	}
}

// TestAPodTemplateOfTheBuffersNameThatIsNotItsStaysTheUsers: a user's
// PodTemplate is named as the one berth keeps for a scalableRef buffer
// (capacitybuffer-<name>). berth neither changes it nor takes it over
// (deleting the buffer would then delete it); the buffer is not ready and
// says why.
func TestAPodTemplateOfTheBuffersNameThatIsNotItsStaysTheUsers(t *testing.T) {
	ctx := context.Background()
	pod := b.Pod("chunk", b.CPU("1"), b.Memory("1Gi"))
	replicas := int32(2)
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}}, Spec: pod.Spec}}}
	users := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "capacitybuffer-api-buffer", Namespace: "default"},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"mine": "yes"}}, Spec: pod.Spec}}
	cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "api-buffer", Namespace: "default"},
		Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "api"}, Percentage: i32(50)}}
	for _, o := range []client.Object{api, users, cb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r := &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: state.NewReadiness(), Recorder: &fakes.Recorder{}}
	got := reconcileBuffer(t, r, "api-buffer")
	if c := readyCondition(got); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "is not this buffer's") {
		t.Errorf("ReadyForProvisioning %+v, want False saying the PodTemplate is not the buffer's", c)
	}
	after := &corev1.PodTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(users), after); err != nil {
		t.Fatal(err)
	}
	if len(after.OwnerReferences) != 0 || after.Template.Labels["mine"] != "yes" {
		t.Errorf("the user's PodTemplate was changed: owners %v, labels %v", after.OwnerReferences, after.Template.Labels)
	}
}

// TestAChunkGetsItsNamespacesLimitRangeDefaults: a PodTemplate whose
// container sets no resources, in a namespace whose LimitRange gives
// containers a default request of 500m cpu and 256Mi, is counted and
// planned as the LimitRanger plugin will admit its pods: 2 cpu of limits
// hold four chunks, and the chunks the provisioner plans request 500m and
// 256Mi each (berth found the chunk requested nothing: the buffer was
// InvalidSpec and, with replicas, its chunks planned no capacity).
func TestAChunkGetsItsNamespacesLimitRangeDefaults(t *testing.T) {
	ctx := context.Background()
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "default"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}
	pod := b.Pod("bare", b.CPU("1"))
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "default"}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
	limits := cbv1beta1.ResourceList{"cpu": resource.MustParse("2")}
	cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "default"},
		Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "bare"}, Limits: &limits}}
	for _, o := range []client.Object{lr, pt, cb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	r := &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: state.NewReadiness(), Recorder: &fakes.Recorder{}}
	got := reconcileBuffer(t, r, "bare")
	if got.Status.Replicas == nil || *got.Status.Replicas != 4 {
		t.Fatalf("status %+v, want 4 chunks", got.Status)
	}
	sets, err := clusterread.Units(ctx, env.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, s := range sets {
		if s.Owner.GetName() == "bare" {
			pods = s.Pods(s.Count)
		}
	}
	if len(pods) != 4 {
		t.Fatalf("%d chunks planned, want 4", len(pods))
	}
	req := pods[0].Spec.Containers[0].Resources.Requests
	if req.Cpu().String() != "500m" || req.Memory().String() != "256Mi" {
		t.Errorf("a planned chunk requests %v, want 500m cpu and 256Mi", req)
	}
}
