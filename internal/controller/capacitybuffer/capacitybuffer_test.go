package capacitybuffer_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/internal/controller/capacitybuffer"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
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
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ready := state.NewReadiness()
	ready.Set(map[string]int32{state.BufferKey("default", "from-template"): 2})
	r := &capacitybuffer.Reconciler{Client: env.Client, Ready: ready}

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

	for name, reason := range map[string]string{"missing-template": capacitybuffer.ReasonTemplateNotFound, "other-strategy": capacitybuffer.ReasonUnsupportedStrategy} {
		cb = reconcileBuffer(t, r, name)
		c := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || cb.Status.Replicas != nil {
			t.Errorf("%s: condition %+v replicas %v, want False/%s and no replicas", name, c, cb.Status.Replicas, reason)
		}
	}
}
