package companion_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
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

// upNode creates a KWOK node and waits until the controller-manager has
// lifted its not-ready taint: the node takes pods.
func upNode(t *testing.T, name, cpu, memory string) *corev1.Node {
	t.Helper()
	node := b.Node(name, cpu, memory, b.KWOK())
	create(t, node)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, "", err
		}
		return len(node.Spec.Taints) == 0, fmt.Sprintf("taints %v", node.Spec.Taints), nil
	})
	return node
}

// placeholderOn creates a companion placeholder of profile holding room on
// node, as the controller would.
func placeholderOn(t *testing.T, name, node, profile string) *corev1.Pod {
	t.Helper()
	ph := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1alpha1.SystemNamespace, Labels: companion.PlaceholderLabels(),
		Annotations: map[string]string{v1alpha1.AnnotationCompanionNode: node, v1alpha1.AnnotationCompanionProfile: profile}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "pause"}}}}
	create(t, ph)
	return ph
}

// companionOf returns a companion of fuseProfile(ns) (not created), pinned
// to node by node affinity on its name, as CSI drivers pin mount pods.
func companionOf(ns, name, node string) *corev1.Pod {
	return b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.Labels("role", ns+"-companion"),
		b.RequireNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}))
}

// gatedCompanion creates a companion of fuseProfile(ns) pinned to node and
// held back by the hand-over gate, as the webhook would.
func gatedCompanion(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	c := companionOf(ns, name, node)
	c.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanionHandover}}
	create(t, c)
	return c
}

// fuseProfile selects pods labelled app=<name>; its companions are in
// namespace <name>, labelled role=<name>-companion; 500m/128Mi.
func fuseProfile(name string, ungateAfter time.Duration) *v1alpha1.CompanionProfile {
	return &v1alpha1.CompanionProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.CompanionProfileSpec{
		Workloads:   v1alpha1.CompanionWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		Companion:   v1alpha1.CompanionShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		Recognize:   v1alpha1.CompanionRecognition{Namespace: name, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"role": name + "-companion"}}},
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

	// A companion pinned to a node where berth holds room for the profile
	// is held back by the hand-over gate (until it has taken that room);
	// one pinned elsewhere is not.
	placeholderOn(t, "hooked-placeholder", "hooked-node", "hooked")
	pinned := func(name, node string) *corev1.Pod {
		c := companionOf("hooked", name, node)
		create(t, c)
		return c
	}
	expect.Eventually(t, 10*time.Second, func(context.Context) (bool, string, error) {
		c := pinned(fmt.Sprintf("companion-%d", time.Now().UnixNano()), "hooked-node")
		return companion.HandoverGated(c), fmt.Sprintf("companion created with gates %v", c.Spec.SchedulingGates), nil
	})
	if c := pinned("companion-elsewhere", "other-node"); len(c.Spec.SchedulingGates) != 0 {
		t.Errorf("a companion pinned to a node without held room got gates %v", c.Spec.SchedulingGates)
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
	// The node is still starting: its node group's startup taint is on.
	node := b.Node("life-node", "4", "8Gi", b.KWOK(), b.NodeTaint("example.com/agent-not-ready", "", corev1.TaintEffectNoSchedule))
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "life"}}, fuseProfile("life", 5*time.Second), node)
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
		pass(t, r, p)
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

	// 2. The provisioning round nominates a node that is still starting:
	// the pod stays gated (the scheduler would find the node unfit and bind
	// it elsewhere, away from its companion's room).
	patch := client.MergeFrom(a.DeepCopy())
	a.Status.NominatedNodeName = "life-node"
	if err := env.Client.Status().Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	if a = reconcileAs(newReconciler(), a); !companion.Gated(a) {
		t.Fatalf("ungated while its nominated node has a startup taint: events %+v", rec.Events)
	}
	ph := &corev1.Pod{}
	phKey := client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ctrlcompanion.PlaceholderName(a.Labels[v1alpha1.LabelCompanionShareKey], "life-node")}
	if err := env.Client.Get(ctx, phKey, ph); !apierrors.IsNotFound(err) {
		t.Fatalf("placeholder held before the node is schedulable (err %v)", err)
	}
	// The node is up: room held there, ungated.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	npatch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = nil
	if err := env.Client.Patch(ctx, node, npatch); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 10*time.Second, func(context.Context) (bool, string, error) {
		a = reconcileAs(newReconciler(), a)
		return !companion.Gated(a), "still gated after the node became schedulable", nil
	})
	if err := env.Client.Get(ctx, phKey, ph); err != nil {
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

	// 3b. A pod whose nominated node is still starting at ungateAfter is
	// ungated with its room held there (the scheduler tries that node
	// first once it is up), not skipped.
	starting := b.Node("life-node-2", "4", "8Gi", b.KWOK(), b.NodeTaint("example.com/agent-not-ready", "", corev1.TaintEffectNoSchedule))
	create(t, starting)
	clk.SetTime(time.Now())
	d := reconcileAs(newReconciler(), gated("d"))
	dpatch := client.MergeFrom(d.DeepCopy())
	d.Status.NominatedNodeName = starting.Name
	if err := env.Client.Status().Patch(ctx, d, dpatch); err != nil {
		t.Fatal(err)
	}
	if d = reconcileAs(newReconciler(), d); !companion.Gated(d) {
		t.Fatal("d ungated before its node is up and before ungateAfter")
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		clk.SetTime(time.Now().Add(6 * time.Second))
		d = reconcileAs(newReconciler(), d)
		return !companion.Gated(d), "still gated", nil
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ctrlcompanion.PlaceholderName(d.Labels[v1alpha1.LabelCompanionShareKey], starting.Name)}, &corev1.Pod{}); err != nil {
		t.Errorf("no placeholder on the starting node at ungateAfter: %v", err)
	}
	if slices.ContainsFunc(rec.Events, func(e fakes.Event) bool { return e.Object == "life/d" && e.Reason == ctrlcompanion.ReasonSkipped }) {
		t.Errorf("d skipped although its node exists: %+v", rec.Events)
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

// TestWorkloadsOfOneShareKeyHoldOneRoomPerNode: the planner puts several
// workloads of one volume on a node with room for one companion between
// them. Nominated there together and looked at by concurrent workers,
// exactly one of them holds that room; the others share it. (Counting the
// nominated ones as holders, each left the room to the others and none
// was held; with a placeholder name per workload, concurrent workers held
// it more than once.)
func TestWorkloadsOfOneShareKeyHoldOneRoomPerNode(t *testing.T) {
	ctx := context.Background()
	const ns, driver = "share", "share.csi.berth.dev"
	profile := &v1alpha1.CompanionProfile{ObjectMeta: metav1.ObjectMeta{Name: "share"}, Spec: v1alpha1.CompanionProfileSpec{
		Workloads: v1alpha1.CompanionWorkloads{CSIDriver: driver},
		Companion: v1alpha1.CompanionShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		Recognize: v1alpha1.CompanionRecognition{Namespace: ns, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "share-companion"}}},
	}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "share-vol"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: "",
		ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "vol"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol"}},
	}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: new(string), VolumeName: pv.Name,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, profile, pv, pvc)
	node := upNode(t, "share-node", "8", "16Gi")

	rec := &fakes.Recorder{}
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: rec, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	reconcileOnce := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		pass(t, r, p)
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	var workloads []*corev1.Pod
	for i := range 3 {
		w := b.Pod(fmt.Sprintf("w-%d", i), b.Namespace(ns), b.NoUID(), b.CPU("1"))
		w.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "vol"}}}}
		w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
		create(t, w)
		workloads = append(workloads, reconcileOnce(w)) // annotated with its companion
	}
	// The provisioning round nominates all three to the node before the
	// companion controller looks at any of them again.
	for _, w := range workloads {
		patch := client.MergeFrom(w.DeepCopy())
		w.Status.NominatedNodeName = node.Name
		if err := env.Client.Status().Patch(ctx, w, patch); err != nil {
			t.Fatal(err)
		}
	}
	// Three workers look at them at the same time.
	var wg sync.WaitGroup
	errs := make(chan error, len(workloads))
	for _, w := range workloads {
		wg.Go(func() {
			if err := passErr(r, w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, w := range workloads {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		if companion.Gated(got) {
			t.Fatalf("%s still gated on a schedulable node", w.Name)
		}
	}
	phs := &corev1.PodList{}
	if err := env.Client.List(ctx, phs, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}); err != nil {
		t.Fatal(err)
	}
	var onNode []string
	for _, ph := range phs.Items {
		if strings.HasPrefix(ph.Annotations["berth.dev/companion-workload"], ns+"/") {
			onNode = append(onNode, ph.Name)
		}
	}
	shared := 0
	for _, e := range rec.Events {
		if e.Reason == ctrlcompanion.ReasonShared {
			shared++
		}
	}
	if len(onNode) != 1 || shared != 2 {
		t.Fatalf("%d placeholders %v and %d workloads sharing, want 1 placeholder and 2 sharing it", len(onNode), onNode, shared)
	}

	// The placeholder holds the room for all three: once it is bound next
	// to the workload that created it, that workload going does not take
	// the room from the two that share it.
	ph := &corev1.Pod{}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: onNode[0]}, ph); err != nil {
			return false, "", err
		}
		return ph.Spec.NodeName == node.Name, fmt.Sprintf("placeholder on %q", ph.Spec.NodeName), nil
	})
	creator, _ := strings.CutPrefix(ph.Annotations["berth.dev/companion-workload"], ns+"/")
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: creator}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: creator}, &corev1.Pod{})
		return apierrors.IsNotFound(err), "creator still there", client.IgnoreNotFound(err)
	})
	pass(t, r, ph)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Pod{}); err != nil {
		t.Errorf("the shared placeholder went with the workload that created it: %v", err)
	}
}

// TestACompanionTakesTheRoomOfOnePlaceholderOnce: each companion that
// comes to a node takes the room of one placeholder there, once — also
// when it is looked at again, by a restarted controller, or when it was
// bound at once without ever pending; a companion older than the
// placeholders (of a workload that ran before) takes none.
func TestACompanionTakesTheRoomOfOnePlaceholderOnce(t *testing.T) {
	ctx := context.Background()
	const ns = "handover"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	node := upNode(t, "handover-node", "8", "16Gi")
	companionPod := func(name string, bound bool) *corev1.Pod {
		c := companionOf(ns, name, node.Name)
		if bound {
			c.Spec.Affinity, c.Spec.NodeName = nil, node.Name
		}
		create(t, c)
		return c
	}
	// A companion of a workload that ran before berth held anything here.
	old := companionPod("old", true)
	time.Sleep(1100 * time.Millisecond) // creation times have a resolution of a second

	rec := &fakes.Recorder{}
	newReconciler := func() *ctrlcompanion.Reconciler {
		return &ctrlcompanion.Reconciler{Client: env.Client, Recorder: rec, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	}
	r := newReconciler()
	// A pass that fails (a conflict: the pod changed since it was read)
	// is retried, as the controller's queue does.
	reconcileOnce := func(r *ctrlcompanion.Reconciler, p *corev1.Pod) {
		t.Helper()
		expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			return err == nil, fmt.Sprintf("pass failed: %v", err), nil
		})
	}
	// Two workloads (a share key each) hold room on the node.
	for _, name := range []string{"w-1", "w-2"} {
		w := b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("1"), b.Labels("app", ns))
		w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
		create(t, w)
		reconcileOnce(r, w)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(w.DeepCopy())
		w.Status.NominatedNodeName = node.Name
		if err := env.Client.Status().Patch(ctx, w, patch); err != nil {
			t.Fatal(err)
		}
		reconcileOnce(r, w)
	}
	placeholders := func() []string {
		t.Helper()
		l := &corev1.PodList{}
		if err := env.Client.List(ctx, l, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ph := range l.Items {
			if ph.Annotations["berth.dev/companion-node"] == node.Name && ph.DeletionTimestamp == nil {
				names = append(names, ph.Name)
			}
		}
		return names
	}
	if got := placeholders(); len(got) != 2 {
		t.Fatalf("placeholders %v, want one per workload", got)
	}
	reconcileOnce(r, old)
	if got := placeholders(); len(got) != 2 {
		t.Errorf("the older companion took room: placeholders left %v", got)
	}

	// A companion pending and pinned to the node takes one placeholder's
	// room; looked at again, and by a restarted controller, no more.
	first := companionPod("first", false)
	reconcileOnce(r, first)
	reconcileOnce(r, first)
	reconcileOnce(newReconciler(), first)
	left := placeholders()
	if len(left) != 1 {
		t.Fatalf("after one companion came: placeholders %v, want 1", left)
	}
	// The remaining placeholder, looked at, stays: no companion is untaken.
	reconcileOnce(newReconciler(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.SystemNamespace, Name: left[0]}})
	if got := placeholders(); len(got) != 1 {
		t.Fatalf("placeholder %s went with no companion for it: left %v", left[0], got)
	}

	// A second companion, bound at once and never seen by a pass of its
	// own, is given the remaining room by the placeholder's pass.
	second := companionPod("second", true)
	reconcileOnce(newReconciler(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.SystemNamespace, Name: left[0]}})
	if got := placeholders(); len(got) != 0 {
		t.Errorf("placeholders left after both companions came: %v", got)
	}
	for _, c := range []*corev1.Pod{first, second} {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations["berth.dev/took-companion-room"] == "" {
			t.Errorf("companion %s does not say whose room it took: %v", c.Name, got.Annotations)
		}
	}
}

// TestAGatedCompanionIsUngatedRightAfterTakingTheRoom: a companion the
// webhook held back takes a placeholder's room and is ungated in the same
// pass, so it is scheduled into that room; one with no room to take, and
// one past handoverGateMax, are ungated at once.
func TestAGatedCompanionIsUngatedRightAfterTakingTheRoom(t *testing.T) {
	ctx := context.Background()
	const ns = "gatedcomp"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	ph := placeholderOn(t, "gatedcomp-ph", "gc-node", ns)
	time.Sleep(1100 * time.Millisecond) // the companion comes after the room was held
	c := gatedCompanion(t, ns, "c", "gc-node")
	none := gatedCompanion(t, ns, "no-room", "gc-other")
	clk := clocktesting.NewFakeClock(time.Now())
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clk, PauseImage: "pause"}
	for _, p := range []*corev1.Pod{c, none} {
		pass(t, r, p)
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		if companion.HandoverGated(got) {
			t.Errorf("%s still held back after its pass", p.Name)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the placeholder is still there after the companion took its room (err %v)", err)
	}

	// Past handoverGateMax the gate goes before anything else is tried:
	// the room held on the node stays for the companion that comes next.
	ph2 := placeholderOn(t, "gatedcomp-ph2", "gc-node", ns)
	time.Sleep(1100 * time.Millisecond)
	late := gatedCompanion(t, ns, "late", "gc-node")
	clk.SetTime(time.Now().Add(11 * time.Second))
	pass(t, r, late)
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(late), got); err != nil {
		t.Fatal(err)
	}
	if companion.HandoverGated(got) {
		t.Error("a companion held back past handoverGateMax is still gated")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ph2), &corev1.Pod{}); err != nil {
		t.Errorf("the pass past handoverGateMax did more than ungate: placeholder %s: %v", ph2.Name, err)
	}
}

// TestAWorkloadStaysGatedWhileItsNodeIsFull: the nominated node takes
// pods but has no room for the workload and its companion right now (a
// companion and the placeholder it has not handed over yet both take a
// slice, or anything else): ungated, kube-scheduler would bind it
// elsewhere, away from its companion's room. It stays gated until the
// room is there.
//
// It runs twice: reading the API server, and reading a manager's cache
// as the controller does, where the room on a node is read through the
// cache's index of pods by node.
func TestAWorkloadStaysGatedWhileItsNodeIsFull(t *testing.T) {
	t.Run("api server", func(t *testing.T) { workloadStaysGatedWhileItsNodeIsFull(t, "full", false) })
	t.Run("manager cache", func(t *testing.T) { workloadStaysGatedWhileItsNodeIsFull(t, "full-cached", true) })
}

func workloadStaysGatedWhileItsNodeIsFull(t *testing.T, ns string, cached bool) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	node := upNode(t, ns+"-node", "2", "8Gi")
	filler := b.Pod("filler", b.Namespace(ns), b.NoUID(), b.CPU("1200m"))
	filler.Spec.NodeName = node.Name
	create(t, filler)

	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	reader := client.Reader(env.Client)
	if cached {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", LeaderElection: false})
		if err != nil {
			t.Fatal(err)
		}
		r.Client, r.APIReader, reader = mgr.GetClient(), env.Client, mgr.GetClient()
		if err := r.Register(mgr); err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go func() { _ = mgr.Start(mctx) }()
		if !mgr.GetCache().WaitForCacheSync(mctx) {
			t.Fatal("the cache did not sync")
		}
	}
	// seen waits until the reconciler's reader shows w nominated as the
	// API server has it.
	seen := func(w *corev1.Pod) {
		t.Helper()
		expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
			got := &corev1.Pod{}
			if err := reader.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
				return false, "", client.IgnoreNotFound(err)
			}
			return got.Status.NominatedNodeName == w.Status.NominatedNodeName, "the cache lags", nil
		})
	}
	w := b.Pod("w", b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.Labels("app", ns))
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	create(t, w)
	seen(w)
	look := func() *corev1.Pod {
		t.Helper()
		pass(t, r, w)
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := look() // annotated with its 500m companion
	nominate(t, got, node.Name)
	seen(got)
	// 1200m taken of 2 cpu: 500m + 500m do not fit.
	if got = look(); !companion.Gated(got) {
		t.Fatal("ungated onto a node without room for it and its companion")
	}
	if err := env.Client.Delete(ctx, filler, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		return !companion.Gated(look()), "still gated with the room free", nil
	})
}

// nominate sets pod's nominatedNodeName to node, as the provisioner does,
// reading the pod first.
func nominate(t *testing.T, pod *corev1.Pod, node string) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Status.NominatedNodeName = node
	if err := env.Client.Status().Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
}

// passErr runs one reconcile of obj as the controller's queue would:
// again after a conflict (the object changed since it was read), for up
// to 10 s.
func passErr(r reconcile.Reconciler, obj client.Object) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		if err == nil || !apierrors.IsConflict(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pass is passErr that fails the test on an error.
func pass(t *testing.T, r reconcile.Reconciler, obj client.Object) {
	t.Helper()
	if err := passErr(r, obj); err != nil {
		t.Fatal(err)
	}
}

// staleCache is a client whose cache has not seen companion placeholders
// yet (created a moment ago).
type staleCache struct{ client.Client }

func (c staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if pl, ok := list.(*corev1.PodList); ok {
		pl.Items = slices.DeleteFunc(pl.Items, func(p corev1.Pod) bool {
			return p.Namespace == v1alpha1.SystemNamespace && p.Labels[v1alpha1.LabelHeadroomRole] == v1alpha1.HeadroomRoleCompanion
		})
	}
	return nil
}

// TestAGatedCompanionFindsAPlaceholderItsCacheHasNotSeen: the webhook held
// the companion back because room is held on its node; the controller's
// cache does not show that placeholder yet. Ungated then, the companion
// would bind next to the placeholder and the room would be held twice
// (seen in the burst of 200: 3 workloads preempted). It asks the API
// server and takes the room.
func TestAGatedCompanionFindsAPlaceholderItsCacheHasNotSeen(t *testing.T) {
	ctx := context.Background()
	const ns = "stale"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	ph := placeholderOn(t, "stale-ph", "stale-node", ns)
	time.Sleep(1100 * time.Millisecond) // the companion comes after the room was held
	c := gatedCompanion(t, ns, "c", "stale-node")

	r := &ctrlcompanion.Reconciler{Client: staleCache{env.Client}, APIReader: env.Client, Recorder: &fakes.Recorder{},
		Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	pass(t, r, c)
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if companion.HandoverGated(got) || got.Annotations["berth.dev/took-companion-room"] == "" {
		t.Errorf("companion: gates %v, annotations %v; want ungated after taking the room", got.Spec.SchedulingGates, got.Annotations)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the placeholder the cache had not seen still holds its room (err %v)", err)
	}
}
