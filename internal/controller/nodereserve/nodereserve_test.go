package nodereserve_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/nodereserve"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/nodeutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const ns = "workload"

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// twoFullNodes: two KWOK nodes of 2 cpu (a and b, or the nodes named),
// each holding a 500m reserve pod and 1500m of workload, the scheduler's
// view once they are Ready.
func twoFullNodes(t *testing.T, names ...string) {
	t.Helper()
	never := corev1.PreemptNever
	create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.PriorityClassNodeReserve}, Value: v1alpha1.PriorityNodeReserve, PreemptionPolicy: &never},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.PriorityClassBurstCritical}, Value: v1alpha1.PriorityBurstCritical, PreemptionPolicy: &never},
	)
	if len(names) == 0 {
		names = []string{"a", "b"}
	}
	for _, n := range names {
		create(t, b.Node(n, "2", "4Gi", b.KWOK(), b.NodeLabels("pool", "reserve")))
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			node := &corev1.Node{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: n}, node); err != nil {
				return false, "", err
			}
			if !nodeutil.Ready(node) || len(node.Spec.Taints) > 0 {
				return false, fmt.Sprintf("node %s: ready %v, taints %v", n, nodeutil.Ready(node), node.Spec.Taints), nil
			}
		}
		return true, "", nil
	})
	for _, n := range names {
		reserve := b.Pod("reserve-"+n, b.Namespace(v1alpha1.SystemNamespace), b.NoUID(), b.NodeName(n), b.CPU("500m"),
			b.Labels(v1alpha1.LabelHeadroomRole, hr.RoleNodeReserve))
		reserve.Spec.PriorityClassName = v1alpha1.PriorityClassNodeReserve
		create(t, reserve, b.Pod("work-"+n, b.Namespace(ns), b.NoUID(), b.NodeName(n), b.CPU("1500m")))
	}
}

// pending creates a pod that selects the two nodes and waits until the
// scheduler has marked it unschedulable.
func pending(t *testing.T, name, priorityClass string) {
	t.Helper()
	p := b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.NodeSelector("pool", "reserve"))
	p.Spec.PriorityClassName = priorityClass
	create(t, p)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return false, "", err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, "", nil
			}
		}
		return false, "not marked unschedulable yet", nil
	})
}

func reconcileNow(t *testing.T, r *nodereserve.Reconciler, name string) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// lagging returns a client whose pod lists show the given pods as they
// were, in place of (or in addition to) what the API server holds now.
func lagging(t *testing.T, stale ...*corev1.Pod) client.Client {
	t.Helper()
	return interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			pods, ok := list.(*corev1.PodList)
			if !ok {
				return nil
			}
			for _, old := range stale {
				pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Namespace == old.Namespace && p.Name == old.Name })
				pods.Items = append(pods.Items, *old)
			}
			return nil
		},
	})
}

func pod(t *testing.T, namespace, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return p
}

// TestBurstCriticalPodsTakeOneReserveEach: on two full nodes, two
// burst-critical pods get one reserve slice each and run on different
// nodes, also when the second is handled from a cache that has not seen
// the first hand-over complete; an ordinary pod is left alone; a third
// burst-critical pod is told no slice is left, and the workload is never
// touched.
func TestBurstCriticalPodsTakeOneReserveEach(t *testing.T) {
	twoFullNodes(t)
	pending(t, "ordinary", "")
	pending(t, "burst-1", v1alpha1.PriorityClassBurstCritical)
	pending(t, "burst-2", v1alpha1.PriorityClassBurstCritical)
	events := &fakes.Recorder{}
	r := &nodereserve.Reconciler{Client: env.Client, Recorder: events}

	reconcileNow(t, r, "ordinary")
	if pod(t, v1alpha1.SystemNamespace, "reserve-a") == nil || pod(t, v1alpha1.SystemNamespace, "reserve-b") == nil {
		t.Fatal("an ordinary pod made berth remove a reserve")
	}
	reserveA := pod(t, v1alpha1.SystemNamespace, "reserve-a")
	reconcileNow(t, r, "burst-1")
	// burst-2 is reconciled from a cache that lags: it has seen burst-1's
	// nomination, but neither the deletion of the reserve pod handed to it
	// nor burst-1's binding. The slice must count as taken all the same.
	// The scheduler may already have bound burst-1, and binding clears
	// the nomination, so either says which node it was given.
	burst1 := pod(t, ns, "burst-1")
	if burst1.Status.NominatedNodeName != "a" && burst1.Spec.NodeName != "a" {
		t.Fatalf("burst-1 nominated to %q, bound to %q, want a (the first node with a reserve)",
			burst1.Status.NominatedNodeName, burst1.Spec.NodeName)
	}
	burst1.Spec.NodeName = ""
	burst1.Status.NominatedNodeName = "a"
	reconcileNow(t, &nodereserve.Reconciler{Client: lagging(t, burst1, reserveA), Recorder: events}, "burst-2")

	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		for _, name := range []string{"burst-1", "burst-2"} {
			if p := pod(t, ns, name); p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("%s: phase %s, node %q", name, p.Status.Phase, p.Spec.NodeName), nil
			}
		}
		return true, "", nil
	})
	n1, n2 := pod(t, ns, "burst-1").Spec.NodeName, pod(t, ns, "burst-2").Spec.NodeName
	if n1 == n2 {
		t.Errorf("both burst-critical pods run on %s, one reserve slice each was expected", n1)
	}
	for _, n := range []string{"a", "b"} {
		if pod(t, v1alpha1.SystemNamespace, "reserve-"+n) != nil {
			t.Errorf("the reserve pod of node %s is still there", n)
		}
		if w := pod(t, ns, "work-"+n); w == nil || w.DeletionTimestamp != nil || w.Spec.NodeName != n {
			t.Errorf("the workload pod of node %s was disturbed", n)
		}
	}
	if p := pod(t, ns, "ordinary"); p.Spec.NodeName != "" {
		t.Errorf("the ordinary pod was bound to %s, into a reserved slice", p.Spec.NodeName)
	}
	for _, name := range []string{"burst-1", "burst-2"} {
		ev := events.For(ns + "/" + name)
		if len(ev) != 1 || ev[0].Reason != nodereserve.ReasonUsingReserve || !strings.Contains(ev[0].Message, "reserve slice of node ") {
			t.Errorf("events on %s: %+v", name, ev)
		}
	}

	pending(t, "burst-3", v1alpha1.PriorityClassBurstCritical)
	reconcileNow(t, r, "burst-3")
	ev := events.For(ns + "/burst-3")
	if len(ev) != 1 || ev[0].Reason != nodereserve.ReasonNoReserveFits || !strings.Contains(ev[0].Message, "no node holds a per-node reserve") {
		t.Errorf("events on burst-3: %+v", ev)
	}
	if p := pod(t, ns, "burst-3"); p.Status.NominatedNodeName != "" || p.Spec.NodeName != "" {
		t.Errorf("burst-3 was given node %q/%q with no slice left", p.Status.NominatedNodeName, p.Spec.NodeName)
	}
	// Looked at again, it is told once; a node with a reserve comes: its
	// reserve pod running wakes the pods that wait (no event of their own
	// would come), and burst-3 gets that slice.
	reconcileNow(t, r, "burst-3")
	if ev := events.For(ns + "/burst-3"); len(ev) != 1 {
		t.Errorf("events on burst-3 after a second look: %+v, want the one", ev)
	}
	// Node e comes full (its reserve and workload bound to it before it
	// registers: the scheduler never sees it empty).
	reserveE := b.Pod("reserve-e", b.Namespace(v1alpha1.SystemNamespace), b.NoUID(), b.NodeName("e"), b.CPU("500m"),
		b.Labels(v1alpha1.LabelHeadroomRole, hr.RoleNodeReserve))
	reserveE.Spec.PriorityClassName = v1alpha1.PriorityClassNodeReserve
	create(t, reserveE, b.Pod("work-e", b.Namespace(ns), b.NoUID(), b.NodeName("e"), b.CPU("1500m")),
		b.Node("e", "2", "4Gi", b.KWOK(), b.NodeLabels("pool", "reserve")))
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		node := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "e"}, node); err != nil {
			return false, "", err
		}
		p := pod(t, v1alpha1.SystemNamespace, "reserve-e")
		return p != nil && p.Status.Phase == corev1.PodRunning && nodeutil.Ready(node) && len(node.Spec.Taints) == 0,
			fmt.Sprintf("reserve-e running %v, node e ready %v, taints %v", p != nil && p.Status.Phase == corev1.PodRunning, nodeutil.Ready(node), node.Spec.Taints), nil
	})
	if p := pod(t, ns, "burst-3"); p.Spec.NodeName != "" {
		t.Fatalf("burst-3 bound to %s before berth handed it a slice", p.Spec.NodeName)
	}
	woken := r.WaitingPods(context.Background(), pod(t, v1alpha1.SystemNamespace, "reserve-e"))
	if !slices.Contains(woken, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "burst-3"}}) {
		t.Fatalf("a reserve pod running woke %v, want burst-3 among them", woken)
	}
	reconcileNow(t, r, "burst-3")
	if p := pod(t, ns, "burst-3"); p.Status.NominatedNodeName != "e" && p.Spec.NodeName != "e" {
		t.Errorf("burst-3 once node e brought a reserve: nominated %q, bound %q; want e", p.Status.NominatedNodeName, p.Spec.NodeName)
	}
}

// TestAReserveThatCouldNotBeRemovedIsHandedOverOnTheRetry: deleting the
// reserve pod fails once (the API server times out) after the pod was
// nominated to its node. The nomination is taken back, so that the retry
// hands the slice over and the pod runs. Before, the retry found the pod
// nominated and left it: the reserve stayed, and nothing clears the
// nomination of a pod that never preempts.
func TestAReserveThatCouldNotBeRemovedIsHandedOverOnTheRetry(t *testing.T) {
	twoFullNodes(t, "c", "d")
	pending(t, "burst-retry", v1alpha1.PriorityClassBurstCritical)
	events := &fakes.Recorder{}
	failing := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return apierrors.NewTimeoutError("the server was unable to return a response in the time allotted", 1)
		},
	})
	r := &nodereserve.Reconciler{Client: failing, Recorder: events}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "burst-retry"}}); err == nil {
		t.Fatal("the reconcile whose delete failed returned no error")
	}
	if p := pod(t, ns, "burst-retry"); p.Status.NominatedNodeName != "" {
		t.Fatalf("burst-retry still nominated to %s after its reserve could not be removed", p.Status.NominatedNodeName)
	}
	reconcileNow(t, &nodereserve.Reconciler{Client: env.Client, Recorder: events}, "burst-retry")
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		p := pod(t, ns, "burst-retry")
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s, node %q", p.Status.Phase, p.Spec.NodeName), nil
	})
}
