package tenant_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/tenant"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// applyLog records the kinds the reconciler applies, in order.
type applyLog struct {
	mu    sync.Mutex
	kinds []string
}

func (l *applyLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.kinds)
}

// reconciler returns a reconciler on the real API server whose applies are
// recorded.
func reconciler(t *testing.T) (*tenant.Reconciler, *applyLog, *fakes.Recorder) {
	t.Helper()
	log := &applyLog{}
	c := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
		data, _ := json.Marshal(obj)
		var tm metav1.TypeMeta
		_ = json.Unmarshal(data, &tm)
		log.mu.Lock()
		log.kinds = append(log.kinds, tm.Kind)
		log.mu.Unlock()
		return c.Apply(ctx, obj, opts...)
	}})
	rec := &fakes.Recorder{}
	return &tenant.Reconciler{Client: c, Reader: env.Client, Recorder: rec, Clock: clock.RealClock{}}, log, rec
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func reconcileOnce(t *testing.T, r *tenant.Reconciler, name string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func getTenant(t *testing.T, name string) *v1alpha1.Tenant {
	t.Helper()
	ten := &v1alpha1.Tenant{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, ten); err != nil {
		t.Fatal(err)
	}
	return ten
}

func tenantType(name, group string, opts ...func(*v1alpha1.TenantType)) *v1alpha1.TenantType {
	tt := &v1alpha1.TenantType{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TenantTypeSpec{
		NodeGroup: group,
		Template: v1alpha1.TenantTemplate{Image: "registry.k8s.io/pause:3.10", Resources: v1alpha1.TenantResources{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
	}}
	for _, o := range opts {
		o(tt)
	}
	return tt
}

func newTenant(name, typ string, config v1alpha1.ConfigValues) *v1alpha1.Tenant {
	return &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TenantSpec{Type: typ, Config: config}}
}

// TestObjectsAreCreatedInOrderOwnedAndPlacedOnTheGroup: a tenant gets its
// Namespace, ConfigMap, Deployment and Service in that order, all owned by
// the tenant; the pod's node selector and tolerations are the group's,
// and a dedicated type keeps other tenant pods off its node in every
// namespace. Reconciling again changes nothing.
func TestObjectsAreCreatedInOrderOwnedAndPlacedOnTheGroup(t *testing.T) {
	ctx := context.Background()
	create(t, b.NodeGroup("order-large", b.TemplateLabel("size", "large"), b.TemplateTaint("size", "large", corev1.TaintEffectNoSchedule)),
		tenantType("order-premium", "order-large", func(tt *v1alpha1.TenantType) {
			tt.Spec.Config = v1alpha1.ConfigValues{"PLAN": "premium", "REGION": "eu"}
			tt.Spec.Service = &v1alpha1.TenantService{Ports: []v1alpha1.TenantServicePort{{Name: "http", Port: 80, TargetPort: 8080}}}
		}),
		newTenant("order-1", "order-premium", v1alpha1.ConfigValues{"REGION": "us"}))
	r, log, _ := reconciler(t)
	reconcileOnce(t, r, "order-1")
	if diff := cmp.Diff([]string{"Namespace", "ConfigMap", "Deployment", "Service"}, log.get()); diff != "" {
		t.Errorf("apply order (-want +got):\n%s", diff)
	}
	ten := getTenant(t, "order-1")
	ns := "tenant-order-1"
	objs := map[string]client.Object{
		"Namespace":  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		"ConfigMap":  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-1-config"}},
		"Deployment": &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-1"}},
		"Service":    &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-1"}},
	}
	for kind, o := range objs {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != ten.UID || ref.Kind != "Tenant" {
			t.Errorf("%s is not controlled by the tenant: %+v", kind, o.GetOwnerReferences())
		}
		if o.GetLabels()[v1alpha1.LabelTenant] != "order-1" {
			t.Errorf("%s labels %v", kind, o.GetLabels())
		}
	}
	if diff := cmp.Diff(map[string]string{"PLAN": "premium", "REGION": "us"}, objs["ConfigMap"].(*corev1.ConfigMap).Data); diff != "" {
		t.Errorf("config: the tenant's values override the type's (-want +got):\n%s", diff)
	}
	d := objs["Deployment"].(*appsv1.Deployment)
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s; want 1, Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if diff := cmp.Diff(map[string]string{"size": "large", v1alpha1.LabelNodeGroup: "order-large"}, pod.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
	wantTol := []corev1.Toleration{{Key: "size", Operator: corev1.TolerationOpEqual, Value: "large", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTol, pod.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil || len(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("dedicated tenant without required anti-affinity: %+v", pod.Affinity)
	}
	term := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != v1alpha1.LabelHostname || term.NamespaceSelector == nil || len(term.NamespaceSelector.MatchLabels)+len(term.NamespaceSelector.MatchExpressions) != 0 ||
		term.LabelSelector.MatchExpressions[0].Key != v1alpha1.LabelTenant {
		t.Errorf("anti-affinity term %+v: want every tenant pod, every namespace, per hostname", term)
	}
	if d.Spec.Template.Labels[v1alpha1.LabelTenant] != "order-1" || d.Spec.Template.Labels[v1alpha1.LabelTenantType] != "order-premium" {
		t.Errorf("pod labels %v", d.Spec.Template.Labels)
	}
	if svc := objs["Service"].(*corev1.Service); svc.Spec.Ports[0].TargetPort.IntValue() != 8080 || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service %+v", svc.Spec)
	}

	gen := d.Generation
	reconcileOnce(t, r, "order-1")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen {
		t.Errorf("reconciling again changed the Deployment (generation %d -> %d)", gen, d.Generation)
	}
}

// TestSharedTypeHasNoAntiAffinity: a type with dedicatedNode false lets
// its tenants share nodes.
func TestSharedTypeHasNoAntiAffinity(t *testing.T) {
	create(t, b.NodeGroup("shared-group"),
		tenantType("shared", "shared-group", func(tt *v1alpha1.TenantType) { tt.Spec.DedicatedNode = ptr.To(false) }),
		newTenant("shared-1", "shared", nil))
	r, _, _ := reconciler(t)
	reconcileOnce(t, r, "shared-1")
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "tenant-shared-1", Name: "shared-1"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.Affinity != nil {
		t.Errorf("a shared tenant got affinity %+v", d.Spec.Template.Spec.Affinity)
	}
}

// TestStatusCarriesBerthsReasonThenTheNode: while the tenant's pod waits,
// the status carries berth's latest scale-up event about it (launching a
// node, or why none can be launched); once the pod runs on a node of the
// group, the tenant is Running there.
func TestStatusCarriesBerthsReasonThenTheNode(t *testing.T) {
	ctx := context.Background()
	create(t, b.NodeGroup("status-medium", b.TemplateLabel("size", "medium"), b.TemplateTaint("size", "medium", corev1.TaintEffectNoSchedule)),
		tenantType("status-standard", "status-medium"), newTenant("status-1", "status-standard", nil))
	r, _, rec := reconciler(t)
	if res := reconcileOnce(t, r, "status-1"); res.RequeueAfter == 0 {
		t.Error("a tenant that does not run yet is not looked at again")
	}
	var pod corev1.Pod
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace("tenant-status-1")); err != nil || len(pods.Items) == 0 {
			return false, "no pod yet", err
		}
		pod = pods.Items[0]
		return true, "", nil
	})
	condition := func() (*v1alpha1.Tenant, *metav1.Condition) {
		reconcileOnce(t, r, "status-1")
		ten := getTenant(t, "status-1")
		return ten, meta.FindStatusCondition(ten.Status.Conditions, v1alpha1.ConditionScheduled)
	}
	scaleUpEvent := func(name, reason, note string, at time.Time) {
		t.Helper()
		create(t, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name},
			EventTime:  metav1.NewMicroTime(at), ReportingController: "berth", ReportingInstance: "berth-test",
			Action: "Provision", Reason: reason, Type: corev1.EventTypeNormal, Note: note,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		})
	}

	now := time.Now()
	scaleUpEvent("ev-1", v1alpha1.EventReasonNotTriggerScaleUp, "No node can be launched for this pod: 0/1 node groups fit: status-medium: node group at maxSize 0", now.Add(-time.Minute))
	ten, c := condition()
	if ten.Status.Phase != v1alpha1.TenantPending || c.Reason != v1alpha1.ReasonNoNodeCanBeLaunched || !strings.Contains(c.Message, "node group at maxSize 0") {
		t.Errorf("after NotTriggerScaleUp: phase %s, condition %+v", ten.Status.Phase, c)
	}
	scaleUpEvent("ev-2", v1alpha1.EventReasonTriggeredScaleUp, "Launching node status-medium-abc (node group status-medium, standard-2) for this pod", now)
	ten, c = condition()
	if ten.Status.Phase != v1alpha1.TenantProvisioning || c.Reason != v1alpha1.ReasonLaunchingNode || !strings.Contains(c.Message, "Launching node status-medium-abc") {
		t.Errorf("after TriggeredScaleUp (newer): phase %s, condition %+v", ten.Status.Phase, c)
	}

	// The node arrives: KWOK runs it, the scheduler binds the pod.
	create(t, b.Node("status-medium-abc", "2", "4Gi", b.KWOK(), b.NodeLabels("size", "medium", v1alpha1.LabelNodeGroup, "status-medium"),
		b.NodeTaint("size", "medium", corev1.TaintEffectNoSchedule)))
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		ten, c := condition()
		return ten.Status.Phase == v1alpha1.TenantRunning && ten.Status.NodeName == "status-medium-abc" && ten.Status.NodeGroup == "status-medium" &&
				c.Status == metav1.ConditionTrue,
			"phase " + string(ten.Status.Phase) + ", node " + ten.Status.NodeName + ", " + c.Message, nil
	})
	if res := reconcileOnce(t, r, "status-1"); res.RequeueAfter != 0 {
		t.Errorf("a running tenant is polled every %s", res.RequeueAfter)
	}
	var reasons []string
	for _, e := range rec.For("status-1") {
		reasons = append(reasons, e.Reason)
	}
	if !slices.Contains(reasons, v1alpha1.ReasonLaunchingNode) || !slices.Contains(reasons, v1alpha1.ReasonPodReady) {
		t.Errorf("tenant events %v: want LaunchingNode and PodReady among them", reasons)
	}
	_ = ctx
}
