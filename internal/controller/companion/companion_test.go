package companion_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	ctrlcompanion "github.com/berth-dev/berth/internal/controller/companion"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
	"github.com/berth-dev/berth/internal/webhook"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// fuseProfile selects pods labelled app=fuse; companions are 500m/128Mi.
func fuseProfile(name string, ungateAfter time.Duration) *v1alpha1.CompanionProfile {
	return &v1alpha1.CompanionProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.CompanionProfileSpec{
		Workloads:   v1alpha1.CompanionWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		Companion:   v1alpha1.CompanionShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		Recognize:   v1alpha1.CompanionRecognition{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"role": name + "-companion"}}},
		UngateAfter: &metav1.Duration{Duration: ungateAfter},
	}}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// serveWebhook runs berth's pod defaulter on loopback with a certificate
// berth issues, registers it with the API server, and returns a function
// that stops serving (the configuration stays, as after a crash).
func serveWebhook(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	port := freePort(t)
	certs := &webhook.Certs{Client: env.Client, Secret: client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "berth-webhook-cert"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Clock: clocktesting.NewFakeClock(time.Now())}
	if _, err := certs.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	srv := crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})
	srv.Register(webhook.PodPath, &admission.Webhook{Handler: &webhook.PodDefaulter{Reader: env.Client, Decoder: admission.NewDecoder(env.Client.Scheme())}})
	done := make(chan struct{})
	go func() { _ = srv.Start(ctx); close(done) }()
	cfg := &webhook.Config{Client: env.Client, Endpoint: webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}}
	if err := cfg.Ensure(ctx, true, certs.CABundle()); err != nil {
		t.Fatal(err)
	}
	stop = func() { cancel(); <-done }
	t.Cleanup(func() {
		stop()
		_ = cfg.Ensure(context.Background(), false, nil)
	})
	return stop
}

func TestWebhookGatesSelectedPodsAndNeverBlocksPodCreation(t *testing.T) {
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hooked"}}, fuseProfile("hooked", 30*time.Second))
	stop := serveWebhook(t)

	n := 0
	newPod := func(labels ...string) *corev1.Pod {
		n++
		p := b.Pod(fmt.Sprintf("p-%d", n), b.Namespace("hooked"), b.NoUID(), b.CPU("100m"))
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			p.Labels[labels[i]] = labels[i+1]
		}
		create(t, p)
		return p
	}
	// The API server picks the configuration up within a moment.
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		p := newPod("app", "hooked")
		return companion.Gated(p), "selected pod created without the gate", nil
	})
	if p := newPod("app", "other"); companion.Gated(p) {
		t.Errorf("a pod no profile selects was gated: %v", p.Spec.SchedulingGates)
	}
	withGate := b.Pod("by-hand", b.Namespace("hooked"), b.NoUID(), b.CPU("100m"))
	withGate.Labels = map[string]string{"app": "hooked"}
	withGate.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	create(t, withGate)
	if len(withGate.Spec.SchedulingGates) != 1 {
		t.Errorf("a pod gated by hand got a second gate: %v", withGate.Spec.SchedulingGates)
	}

	// berth down: the API server still admits pods (failure policy
	// Ignore), without the gate.
	stop()
	start := time.Now()
	p := newPod("app", "hooked")
	if companion.Gated(p) {
		t.Error("gated while the webhook is down?")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("pod creation took %s with the webhook down", d)
	}
}

func TestGateLifecycle(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "life"}}, fuseProfile("life", 5*time.Second),
		b.Node("life-node", "4", "8Gi", b.KWOK()))
	rec := &fakes.Recorder{}
	clk := clocktesting.NewFakeClock(time.Now())
	newReconciler := func() *ctrlcompanion.Reconciler {
		return &ctrlcompanion.Reconciler{Client: env.Client, Recorder: rec, Clock: clk, PauseImage: "pause"}
	}
	gated := func(name string) *corev1.Pod {
		p := b.Pod(name, b.Namespace("life"), b.NoUID(), b.CPU("1"))
		p.Labels = map[string]string{"app": "life"}
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
		create(t, p)
		return p
	}
	reconcileAs := func(r *ctrlcompanion.Reconciler, p *corev1.Pod) *corev1.Pod {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// 1. Annotated with its companion, still gated until a node is chosen.
	a := reconcileAs(newReconciler(), gated("a"))
	if a.Annotations[v1alpha1.AnnotationCompanionRequests] == "" || a.Labels[v1alpha1.LabelCompanionShareKey] == "" || !companion.Gated(a) {
		t.Fatalf("after the first pass: annotations %v, labels %v, gates %v", a.Annotations, a.Labels, a.Spec.SchedulingGates)
	}
	if a = reconcileAs(newReconciler(), a); !companion.Gated(a) {
		t.Fatal("ungated before a node was chosen and before ungateAfter")
	}

	// 2. The provisioning round nominates a node: room held there, ungated.
	patch := client.MergeFrom(a.DeepCopy())
	a.Status.NominatedNodeName = "life-node"
	if err := env.Client.Status().Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	if a = reconcileAs(newReconciler(), a); companion.Gated(a) {
		t.Fatal("still gated after the room was held")
	}
	ph := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "companion-" + string(a.UID)}, ph); err != nil {
		t.Fatalf("no placeholder: %v", err)
	}
	if cpu := ph.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.String() != "500m" ||
		ph.Spec.PriorityClassName != v1alpha1.PriorityClassCompanionHeadroom ||
		ph.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "life-node" {
		t.Errorf("placeholder: requests %v, class %s, affinity %+v", ph.Spec.Containers[0].Resources.Requests, ph.Spec.PriorityClassName, ph.Spec.Affinity)
	}

	// 3. Never stuck: a pod no node is found for is ungated after
	// ungateAfter, by a controller that restarted in between.
	c := reconcileAs(newReconciler(), gated("c"))
	if !companion.Gated(c) {
		t.Fatal("ungated at once")
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		clk.SetTime(time.Now().Add(6 * time.Second))
		got := reconcileAs(newReconciler(), c)
		return !companion.Gated(got), "still gated", nil
	})
	if !slices.ContainsFunc(rec.Events, func(e fakes.Event) bool {
		return e.Object == "life/c" && e.Reason == ctrlcompanion.ReasonSkipped && strings.Contains(e.Message, "within 5s")
	}) {
		t.Errorf("no %s event for life/c: %+v", ctrlcompanion.ReasonSkipped, rec.Events)
	}

	// 4. The placeholder goes once its workload is gone.
	if err := env.Client.Delete(ctx, a, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		if _, err := newReconciler().Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ph)}); err != nil {
			return false, "", err
		}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Pod{})
		return apierrors.IsNotFound(err), "placeholder still there", client.IgnoreNotFound(err)
	})
}
