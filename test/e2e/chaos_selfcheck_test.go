package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestChaosWatcherCatchesViolations breaks every invariant of the soak on
// purpose, without berth, and checks that the soak's checks see each
// break once and nothing else: two web pods deleted under a PDB (the
// healthy pods counted and the PDB's status both drop below its minimum);
// a web pod evicted through the Eviction API, then its node deleted under
// a bare pod and a filler pod (the evicted one is not counted); the bare
// pod deleted; a pod removed with the pod garbage collector's disruption
// reason; a node without berth's owner mark deleted; a workload pod
// deleted through the chaos proxy (as berth would); and a node left
// tainted, a pod left gated and a wrong node count at a phase's end.
func TestChaosWatcherCatchesViolations(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ng := b.NodeGroup("chaos-check", b.Size(0, 0))
	createNodeGroup(t, ng)
	w, err := startChaosWatcher(ns, map[string]types.UID{ng.Name: ng.UID})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	owned := b.Node("chaos-check-owned", "4", "8Gi", b.KWOK(), b.LaunchedBy(ng))
	owned.Spec.ProviderID = v1alpha1.ProviderIDPrefixKWOK + owned.Name // as the KWOK provider makes it: berth creates no other node
	foreign := b.Node("chaos-check-foreign", "4", "8Gi", b.KWOK(), b.NodeLabels(v1alpha1.LabelNodeGroup, ng.Name))
	// Only berth's account may write the owner mark.
	if err := asController(t).Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), owned) })
	createForTest(t, foreign)
	pod := func(name, kind, node string) *corev1.Pod {
		return b.Pod(name, b.Namespace(ns), b.NoUID(), b.NodeName(node), b.Labels(labelChaosKind, kind))
	}
	createPods(t, pod("bare", kindBare, owned.Name), pod("web-0", kindWeb, owned.Name), pod("web-1", kindWeb, owned.Name),
		pod("web-2", kindWeb, owned.Name), pod("filler", kindFiller, owned.Name), pod("victim", kindFiller, foreign.Name),
		pod("collected", kindFiller, foreign.Name))
	waitRunning(t, ns, 7, time.Minute)

	breakPDB(t, w, ns)
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: ns}}
	if err := env.Clientset.CoreV1().Pods(ns).EvictV1(ctx, ev); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, "web-2")
	if err := env.Client.Delete(ctx, owned); err != nil {
		t.Fatal(err)
	}
	deletePod(t, ns, "bare")
	markDisrupted(t, ns, "collected", "DeletionByPodGC")
	deletePod(t, ns, "collected")
	throughProxy(t, w, ns, "victim")
	if err := env.Client.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the watch events
	w.judgeNodeDeletions(0)

	expectCaught(t, w, map[string]int{violPDB: 2, violNodeUnderPod: 2, violProtectedDeleted: 1, violPodLost: 1, violForeignNode: 1, violBerthDeletedPod: 1})
	if figures := w.figures(); !strings.Contains(figures, "evicted 1,") {
		t.Errorf("the eviction of web-2 was not counted: %s", figures)
	}
	checkLeftovers(t, ns, ng.Name)
}

// breakPDB deletes two of three web pods under a PDB of minAvailable 2,
// with the watcher guarding it, then removes the PDB.
func breakPDB(t *testing.T, w *chaosWatcher, ns string) {
	t.Helper()
	ctx := context.Background()
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelChaosKind: kindWeb}}}}
	createForTest(t, pdb)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		return err == nil && pdb.Status.CurrentHealthy == 3, fmt.Sprintf("PDB status %+v", pdb.Status), err
	})
	w.guardPDB(2)
	deletePod(t, ns, "web-0")
	deletePod(t, ns, "web-1") // 1 healthy web pod left, PDB minimum 2
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		return len(w.found()) >= 2, fmt.Sprintf("caught %v, want the pod count and the PDB status below the minimum", w.found()), nil
	})
	w.unguardPDB()
	if err := env.Client.Delete(ctx, pdb); err != nil { // so that the last one may be evicted
		t.Fatal(err)
	}
}

// expectCaught checks the violations the watcher found, by kind.
func expectCaught(t *testing.T, w *chaosWatcher, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, v := range w.found() {
		got[v.Kind]++
		t.Logf("caught: %s: %s", v.Kind, v.Detail)
	}
	for kind := range got {
		if _, ok := want[kind]; !ok {
			want[kind] = 0
		}
	}
	for kind, n := range want {
		if got[kind] != n {
			t.Errorf("%q: caught %d times, want %d", kind, got[kind], n)
		}
	}
}

// checkLeftovers: a node tainted by berth, a gated pod and a wrong node
// count keep a phase from settling.
func checkLeftovers(t *testing.T, ns, group string) {
	t.Helper()
	tainted := b.Node("chaos-check-tainted", "4", "8Gi", b.KWOK(), b.NodeLabels(v1alpha1.LabelNodeGroup, group),
		b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule))
	gated := b.Pod("gated", b.Namespace(ns), b.NoUID(), b.Labels(labelChaosKind, kindFiller))
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "berth.dev/companion"}}
	createForTest(t, tainted, gated)
	probs, err := nodeProblems(context.Background(), map[string]int{group: 2})
	if err != nil {
		t.Fatal(err)
	}
	podProbs, err := phaseProblems(context.Background(), ns, chaosPhase{})
	if err != nil {
		t.Fatal(err)
	}
	all := fmt.Sprint(append(probs, podProbs...))
	for _, s := range []string{violLeftover + " node chaos-check-tainted: taint " + v1alpha1.TaintDisrupted, violCount + " group chaos-check has 1 nodes, planned 2",
		violLeftover + " pod " + ns + "/gated is gated"} {
		if !strings.Contains(all, s) {
			t.Errorf("a phase's end does not report %q; it reports %s", s, all)
		}
	}
}

func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, name)
}

func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
		return client.IgnoreNotFound(err) == nil && err != nil, "pod " + name + " still there", client.IgnoreNotFound(err)
	})
}

// markDisrupted gives a pod the DisruptionTarget condition another
// deleter would have written.
func markDisrupted(t *testing.T, ns, name, reason string) {
	t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reason, LastTransitionTime: metav1.Now()})
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// throughProxy deletes a pod through a fault-free chaos proxy, as berth
// would, and lets judgeBerthWrites report it to w.
func throughProxy(t *testing.T, w *chaosWatcher, ns, name string) {
	t.Helper()
	proxy, err := newChaosProxy(env.Config, faultRates{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.close()
	cfg := &rest.Config{Host: proxy.server.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.server.Certificate().Raw})}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, name)
	judgeBerthWrites(w, proxy, ns)
}
