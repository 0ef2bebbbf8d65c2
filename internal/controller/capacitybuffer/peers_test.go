package capacitybuffer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/internal/controller/capacitybuffer"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// limitedByQuotas is Cluster Autoscaler's condition type
// (capacitybuffer.LimitedByQuotasCondition, named in the buffers proposal:
// "true when the buffer is smaller than specified because of the quotas").
const limitedByQuotas = "LimitedByQuotas"

func reconcileIn(t *testing.T, r *capacitybuffer.Reconciler, ns, name string) *cbv1beta1.CapacityBuffer {
	t.Helper()
	key := client.ObjectKey{Namespace: ns, Name: name}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	cb := &cbv1beta1.CapacityBuffer{}
	if err := env.Client.Get(context.Background(), key, cb); err != nil {
		t.Fatal(err)
	}
	return cb
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// quotaNamespace makes a namespace with a 5-cpu quota (filled in by the
// quota controller) and a PodTemplate of one 1-cpu chunk, as Cluster
// Autoscaler's "should respect k8s ResourceQuotas" integration test.
func quotaNamespace(t *testing.T, name string) {
	t.Helper()
	pod := b.Pod("pod-temp", b.CPU("1"))
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: name}, Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{"cpu": resource.MustParse("5")}}},
		&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "pod-temp", Namespace: name}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}})
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		q := &corev1.ResourceQuota{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "quota"}, q)
		return err == nil && q.Status.Hard != nil, "the quota controller has not filled the quota's status", err
	})
}

func templateBuffer(ns, name string, replicas int32) *cbv1beta1.CapacityBuffer {
	return &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "pod-temp"}, Replicas: &replicas}}
}

// TestBufferCutByQuotaSaysLimitedByQuotas: Cluster Autoscaler marks a
// buffer its namespace's quotas cut with condition LimitedByQuotas=True
// (reason ResourceQuotasAllocated, message naming the quotas), and one
// they do not cut with LimitedByQuotas=False (common.MarkBufferAsLimitedByQuota,
// UpdateBufferStatusLimitedByQuotas; asserted by its integration test).
func TestBufferCutByQuotaSaysLimitedByQuotas(t *testing.T) {
	const ns = "ca-quota-condition"
	quotaNamespace(t, ns)
	create(t, templateBuffer(ns, "b1", 2), templateBuffer(ns, "b2", 4))
	r := newReconciler()

	b1 := reconcileIn(t, r, ns, "b1")
	b2 := reconcileIn(t, r, ns, "b2")
	if b2.Status.Replicas == nil || *b2.Status.Replicas != 3 {
		t.Fatalf("b2 keeps %v chunks, want 3 (5 cpu - b1's 2)", b2.Status.Replicas)
	}
	if !meta.IsStatusConditionFalse(b1.Status.Conditions, limitedByQuotas) {
		t.Errorf("b1 (not cut): conditions %+v, want %s=False", b1.Status.Conditions, limitedByQuotas)
	}
	if !meta.IsStatusConditionTrue(b2.Status.Conditions, limitedByQuotas) {
		t.Errorf("b2 (cut from 4 to 3): conditions %+v, want %s=True", b2.Status.Conditions, limitedByQuotas)
	}
}

// TestQuotaGoesToBuffersInOrderOfCreation: Cluster Autoscaler hands a
// namespace's quota to its buffers in order of creation (then name), every
// time it reconciles the namespace (controller.reconcileNamespace,
// resourceQuotaAllocator.Allocate): when the older buffer b1 grows from 2
// to 4 chunks under a 5-cpu quota, b1 keeps 4 and the younger b2 drops
// from 3 to 1 (its integration test "buffers are ordered in the order of
// creation").
func TestQuotaGoesToBuffersInOrderOfCreation(t *testing.T) {
	const ns = "ca-quota-order"
	quotaNamespace(t, ns)
	create(t, templateBuffer(ns, "b1", 2))
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of one second
	create(t, templateBuffer(ns, "b2", 4))
	r := newReconciler()
	reconcileIn(t, r, ns, "b1")
	reconcileIn(t, r, ns, "b2")

	b1 := &cbv1beta1.CapacityBuffer{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "b1"}, b1); err != nil {
		t.Fatal(err)
	}
	b1.Spec.Replicas = i32(4)
	if err := env.Client.Update(context.Background(), b1); err != nil {
		t.Fatal(err)
	}
	var got1, got2 *cbv1beta1.CapacityBuffer
	for range 3 { // any order, several times: the allocation must settle
		got1 = reconcileIn(t, r, ns, "b1")
		got2 = reconcileIn(t, r, ns, "b2")
	}
	if got1.Status.Replicas == nil || *got1.Status.Replicas != 4 || got2.Status.Replicas == nil || *got2.Status.Replicas != 1 {
		t.Errorf("b1 keeps %v, b2 keeps %v chunks; want 4 and 1 (the older buffer first)", ptrString(got1.Status.Replicas), ptrString(got2.Status.Replicas))
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// TestDeploymentBufferCopiesItsLivePod: Cluster Autoscaler takes a
// scalableRef buffer's chunk from the newest pod of the object's scale
// selector whenever one exists, Deployments included
// (ScalableObjectsTranslator.resolveSpecAndReplicas: "This is the
// preferred method as it uses the exact spec from a running pod, which is
// fully defaulted"), and from the object's template only when no pod
// exists. A Deployment whose template requests nothing, in a namespace
// whose LimitRange defaults cpu to 500m, runs 500m pods: its buffer's
// chunk is 500m, not an empty pod that keeps no room anywhere.
func TestDeploymentBufferCopiesItsLivePod(t *testing.T) {
	const ns = "ca-live-pod"
	replicas := int32(2)
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}})
	pod := b.Pod("api") // no requests: the LimitRange gives them
	create(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}}, Spec: pod.Spec}}})
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "api"})
		return err == nil && len(pods.Items) > 0, "the Deployment has no pod yet", err
	})
	limits := cbv1beta1.ResourceList{"cpu": resource.MustParse("2")}
	create(t, &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "api"}, Limits: &limits}})
	r := newReconciler()

	cb := reconcileIn(t, r, ns, "api")
	if c := readyCondition(cb); c == nil || c.Status != metav1.ConditionTrue || cb.Status.Replicas == nil || *cb.Status.Replicas != 4 {
		t.Fatalf("ReadyForProvisioning %+v, replicas %s; want True and 4 chunks of the pods' 500m within 2 cpu", c, ptrString(cb.Status.Replicas))
	}
	pt := chunkTemplate(t, cb)
	if cpu := pt.Template.Spec.Containers[0].Resources.Requests.Cpu(); cpu.Cmp(resource.MustParse("500m")) != 0 {
		t.Errorf("chunk requests %s cpu, want the live pods' 500m", cpu)
	}
}

// TestReplicationControllerBufferWithoutPods: Cluster Autoscaler resolves
// a ReplicationController (apiGroup "core", its spelling) from its own
// template and replicas when it has no pod
// (scalable_object_resolvers.go replicationController): a buffer of 2
// chunks for an RC scaled to zero is ready.
func TestReplicationControllerBufferWithoutPods(t *testing.T) {
	const ns = "ca-rc"
	zero := int32(0)
	pod := b.Pod("legacy", b.CPU("1"))
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns}, Spec: corev1.ReplicationControllerSpec{
			Replicas: &zero, Selector: map[string]string{"app": "legacy"},
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "legacy"}}, Spec: pod.Spec}}},
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns},
			Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "core", Kind: "ReplicationController", Name: "legacy"}, Replicas: i32(2)}})
	r := newReconciler()
	cb := reconcileIn(t, r, ns, "legacy")
	if c := readyCondition(cb); c == nil || c.Status != metav1.ConditionTrue || cb.Status.Replicas == nil || *cb.Status.Replicas != 2 {
		t.Errorf("ReadyForProvisioning %+v, replicas %s; want True and 2 chunks of the RC's template", c, ptrString(cb.Status.Replicas))
	}
}

// TestBufferNotReadyClearsItsTranslation: when a buffer can no longer be
// translated (its PodTemplate was deleted), Cluster Autoscaler writes
// ReadyForProvisioning=False with podTemplateRef, podTemplateGeneration
// and replicas all unset (SetBufferAsNotReadyForProvisioning(buffer, nil,
// nil, nil, ...)); the status must not keep naming a template it no
// longer uses.
func TestBufferNotReadyClearsItsTranslation(t *testing.T) {
	ctx := context.Background()
	const ns = "ca-not-ready"
	pod := b.Pod("chunk", b.CPU("1"))
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: ns}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, pt,
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "buf", Namespace: ns},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: i32(2)}})
	r := newReconciler()
	if cb := reconcileIn(t, r, ns, "buf"); cb.Status.PodTemplateRef == nil {
		t.Fatalf("not translated first: %+v", cb.Status)
	}
	if err := env.Client.Delete(ctx, pt); err != nil {
		t.Fatal(err)
	}
	cb := reconcileIn(t, r, ns, "buf")
	if c := readyCondition(cb); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("ReadyForProvisioning %+v, want False", c)
	}
	if cb.Status.PodTemplateRef != nil || cb.Status.PodTemplateGeneration != nil || cb.Status.Replicas != nil {
		t.Errorf("not-ready status keeps podTemplateRef %v, podTemplateGeneration %v, replicas %s; want all unset",
			cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration, ptrString(cb.Status.Replicas))
	}
}

// TestV1alpha1BuffersAreServed: Cluster Autoscaler's CRD
// (apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml) serves
// v1alpha1 (deprecated) beside v1beta1; manifests and clients written for
// v1alpha1 keep working where berth's CRD is installed.
func TestV1alpha1BuffersAreServed(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityBuffer",
		"metadata": map[string]any{"name": "alpha", "namespace": "default"},
		"spec":     map[string]any{"podTemplateRef": map[string]any{"name": "chunk"}, "replicas": int64(1)},
	}}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Errorf("creating a v1alpha1 CapacityBuffer: %v", err)
	}
}

// TestADeploymentBufferCopiesItsOwnPodsNotAHooksWithItsLabels: a Helm
// migration Job's pods carry the Deployment's selector labels and are
// newer than its pods; the buffer's chunk is the Deployment's 2-cpu pod,
// not the Job's 100m one.
func TestADeploymentBufferCopiesItsOwnPodsNotAHooksWithItsLabels(t *testing.T) {
	const ns = "cb-own-pods"
	replicas := int32(1)
	labels := map[string]string{"app": "api"}
	app := b.Pod("api", b.CPU("2"))
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: app.Spec}}})
	waitForPods(t, ns, "app=api", 1)
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of one second
	hook := b.Pod("migrate", b.CPU("100m"))
	hook.Spec.RestartPolicy = corev1.RestartPolicyNever
	create(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: hook.Spec}}})
	waitForPods(t, ns, "app=api", 2)
	create(t, &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "api"}, Replicas: i32(2)}})
	r := newReconciler()
	cb := reconcileIn(t, r, ns, "api")
	pt := chunkTemplate(t, cb)
	if cpu := pt.Template.Spec.Containers[0].Resources.Requests.Cpu(); cpu.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("chunk requests %s cpu, want the Deployment's pods' 2 (not the Job's 100m)", cpu)
	}
}

// TestAStatefulSetBufferChunkNamesNoPodsOwnClaim: a StatefulSet's pod
// mounts the claim its volumeClaimTemplates made for it (data-db-0) and
// carries its own hostname and pod-name label; the buffer's chunks name
// none of them (each chunk would need that one volume, in its zone).
func TestAStatefulSetBufferChunkNamesNoPodsOwnClaim(t *testing.T) {
	const ns = "cb-sts-identity"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, statefulSetWithClaims(ns, 1))
	waitForPods(t, ns, "app=db", 1)
	create(t, &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "db"}, Replicas: i32(3)}})
	r := newReconciler()
	cb := reconcileIn(t, r, ns, "db")
	pt := chunkTemplate(t, cb)
	for _, v := range pt.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("chunk names claim %q of one pod", v.PersistentVolumeClaim.ClaimName)
		}
	}
	if pt.Template.Spec.Hostname != "" || pt.Template.Labels[appsv1.StatefulSetPodNameLabel] != "" {
		t.Errorf("chunk carries the pod's identity: hostname %q, labels %v", pt.Template.Spec.Hostname, pt.Template.Labels)
	}
}

// waitForPods waits until the namespace has n pods the selector matches.
func waitForPods(t *testing.T, ns, selector string, n int) {
	t.Helper()
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		sel, err := k8slabels.Parse(selector)
		if err != nil {
			return false, "", err
		}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return false, "", err
		}
		return len(pods.Items) >= n, fmt.Sprintf("%d of %d pods (%s)", len(pods.Items), n, selector), nil
	})
}

// TestAStatefulSetWithoutPodsIsABufferToo: a StatefulSet scaled to zero
// whose template mounts a volume of its volumeClaimTemplates: the
// buffer's PodTemplate (the template, the claim's volume an empty dir) is
// valid and the buffer ready.
func TestAStatefulSetWithoutPodsIsABufferToo(t *testing.T) {
	const ns = "cb-sts-zero"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, statefulSetWithClaims(ns, 0),
		&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "db"}, Replicas: i32(2)}})
	r := newReconciler()
	cb := reconcileIn(t, r, ns, "db")
	if c := readyCondition(cb); c == nil || c.Status != metav1.ConditionTrue || cb.Status.Replicas == nil || *cb.Status.Replicas != 2 {
		t.Errorf("ReadyForProvisioning %+v, replicas %s; want True and 2 chunks of the StatefulSet's template", c, ptrString(cb.Status.Replicas))
	}
}

// newReconciler is a buffer reconciler on the test's control plane.
func newReconciler() *capacitybuffer.Reconciler {
	return &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: state.NewReadiness(), Recorder: &fakes.Recorder{}}
}

// chunkTemplate is the PodTemplate a translated buffer's status names.
func chunkTemplate(t *testing.T, cb *cbv1beta1.CapacityBuffer) *corev1.PodTemplate {
	t.Helper()
	if cb.Status.PodTemplateRef == nil {
		t.Fatalf("buffer not translated: %+v", cb.Status)
	}
	pt := &corev1.PodTemplate{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: cb.Namespace, Name: cb.Status.PodTemplateRef.Name}, pt); err != nil {
		t.Fatal(err)
	}
	return pt
}

// statefulSetWithClaims is StatefulSet db (1-cpu pods, app=db) whose
// pods mount the volume "data" of its volumeClaimTemplates.
func statefulSetWithClaims(ns string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	db := b.Pod("db", b.CPU("1"))
	db.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: "db",
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: db.Spec},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}
}
