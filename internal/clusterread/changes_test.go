package clusterread_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPodChangesNameThePodsAndReadThemWhenTaken: nothing is named
// before a round first takes changes (that take gives none); between two
// takes, the pods the events named are read from the store as it is when
// they are taken (the pod now, nil once gone, from a tombstone too); takes are
// numbered one after the other, from a point of their own; past the
// bound nothing is named and the take says so (nil), and the one after
// it takes up again.
func TestPodChangesNameThePodsAndReadThemWhenTaken(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	w := clusterread.NewPodChanges(store)
	w.Note(b.Pod("before"))
	if ch := w.Take(); ch != nil {
		t.Fatalf("the first take gave %d pods, want none (nil): nothing is named before a round takes changes", len(ch.Pods))
	}
	web, gone := b.Pod("web"), b.Pod("gone")
	newer := web.DeepCopy()
	for _, p := range []*corev1.Pod{web, gone} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
		w.Note(p)
	}
	if err := store.Update(newer); err != nil { // its event not in yet
		t.Fatal(err)
	}
	if err := store.Delete(gone); err != nil {
		t.Fatal(err)
	}
	w.Note(toolscache.DeletedFinalStateUnknown{Key: "default/gone", Obj: gone})
	ch := w.Take()
	key := func(p *corev1.Pod) types.NamespacedName {
		return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	}
	if ch == nil || ch.To != ch.From+1 || len(ch.Pods) != 2 {
		t.Fatalf("first take: %+v, want two pods, To = From + 1", ch)
	}
	if ch.Pods[key(web)] != newer {
		t.Errorf("web is not the store's object when taken")
	}
	if p, ok := ch.Pods[key(gone)]; !ok || p != nil {
		t.Errorf("gone: %v (named %v), want named and nil", p, ok)
	}
	from := ch.To
	if ch := w.Take(); ch == nil || ch.From != from || len(ch.Pods) != 0 {
		t.Fatalf("second take: %+v, want nothing from %d", ch, from)
	}
	other := clusterread.NewPodChanges(store)
	other.Take()
	if ch := other.Take(); ch.From == from+1 {
		t.Errorf("another watch's changes seem to follow on from this one's")
	}
	w.SetMaxChangedPods(1)
	w.Note(web)
	w.Note(gone)
	if ch := w.Take(); ch != nil {
		t.Fatalf("a take past the bound gave %d pods, want none (nil)", len(ch.Pods))
	}
	w.Note(web)
	if ch := w.Take(); ch == nil || ch.From != from+2 || len(ch.Pods) != 1 {
		t.Fatalf("the take after: %+v, want one pod from %d", ch, from+2)
	}
}

// TestPodChangesKeepABaseEqualToTheCluster drives pods on a real API
// server (created, made again bigger on another node, bound to a node
// that registers later, finished, deleted while a finalizer holds them
// and gone when it is removed) and plans rounds as the provisioner does:
// the changes and the bound pods taken from the index the informer's
// events keep, the base brought up to date from the changes. After each
// step, once the informer has it, the base is the cluster built from
// scratch from every pod of the informer's store, and got there from the
// changes, not by looking at every pod.
func TestPodChangesKeepABaseEqualToTheCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := fmt.Sprintf("changes-%d", time.Now().UnixNano()%1_000_000)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
	})
	cache, err := crcache.New(env.Config, crcache.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// What the events trigger (the provisioner's rounds) sees the index
	// with the pod already.
	var w *clusterread.PodChanges
	var missed atomic.Int32
	w, err = clusterread.WatchPods(ctx, cache, toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p := obj.(*corev1.Pod); !w.IndexHolds(p.Namespace, p.Name) && (podutil.IsBound(p) || p.Spec.NodeName == "") {
			missed.Add(1)
		}
	}})
	if err != nil || w == nil {
		t.Fatalf("watching pods: %v (%v)", err, w)
	}
	defer func() {
		if n := missed.Load(); n > 0 {
			t.Errorf("%d pod events were handed on before the index held the pod", n)
		}
	}()
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	base := snapshot.NewBase()
	// A round as the provisioner's: the changes and the bound pods from
	// the index (the base reads them), against the cluster built from
	// scratch from every pod the store holds.
	round := func() (string, string) {
		t.Helper()
		ix, ok := w.TakeIndexed()
		if !ok {
			ix.Changes = w.Take() // the index has not seen the informer's first pods yet
		}
		cl, err := clusterread.Read(ctx, cache, clusterread.Parts{SharedNodes: true, Informers: cache})
		if err != nil {
			t.Fatal(err)
		}
		in := snapshot.Input{Pods: cl.Pods, Namespaces: cl.Namespaces, Changes: ix.Changes}
		for _, n := range cl.Nodes {
			in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
		}
		fromIndex := in
		if ok {
			fromIndex.Pods = ix.Bound
		}
		s, err := base.Snapshot(fromIndex)
		if err != nil {
			t.Fatal(err)
		}
		got := observe(s)
		base.Release(s)
		fresh, err := snapshot.New(in)
		if err != nil {
			t.Fatal(err)
		}
		return observe(fresh), got
	}
	// converge plans rounds until the cluster built from scratch shows
	// the step (ready), and then until the base, brought up to date from
	// the changes, is that cluster.
	converge := func(step string, ready func(scratch string) bool) {
		t.Helper()
		var want, got string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			before := base.FromChanges
			if want, got = round(); ready(want) && want == got && base.FromChanges > before {
				return
			}
		}
		t.Fatalf("%s: the base did not come to the cluster built from scratch from the changes (-scratch +base):\n%s\nscratch:\n%s", step, cmp.Diff(want, got), want)
	}
	has := func(s ...string) func(string) bool {
		return func(scratch string) bool {
			for _, x := range s {
				if !strings.Contains(scratch, x) {
					return false
				}
			}
			return true
		}
	}
	node := func(name string) {
		t.Helper()
		n := b.Node(name, "8", "32Gi")
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	}
	pod := func(name, node, cpu string, opts ...b.PodOption) *corev1.Pod {
		t.Helper()
		p := b.Pod(name, append([]b.PodOption{b.NoUID(), b.Namespace(ns), b.NodeName(node), b.CPU(cpu), b.Labels("app", "web")}, opts...)...)
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	on := func(node string, pods ...string) string { return fmt.Sprintf("%s pods=%v", node, pods) }
	node("changes-a")
	node("changes-b")
	var pods []*corev1.Pod
	for i := range 6 {
		pods = append(pods, pod(fmt.Sprintf("web-%d", i), []string{"changes-a", "changes-b"}[i%2], "500m"))
	}
	w0, w1, w2, w3, w4, w5 := ns+"/web-0", ns+"/web-1", ns+"/web-2", ns+"/web-3", ns+"/web-4", ns+"/web-5"
	converge("pods created", has(on("changes-a", w0, w2, w4), on("changes-b", w1, w3, w5)))

	if err := env.Client.Delete(ctx, pods[1], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	pod("web-1", "changes-a", "2") // made again, bigger, elsewhere
	pod("late-0", "changes-late", "1")
	pods[2].Status.Phase = corev1.PodSucceeded
	if err := env.Client.Status().Update(ctx, pods[2]); err != nil {
		t.Fatal(err)
	}
	converge("pods changed", has(on("changes-a", w0, w1, w4)+" cpu=3000", on("changes-b", w3, w5)))

	held := pod("held", "changes-b", "1", func(p *corev1.Pod) { p.Finalizers = []string{"berth.dev/test-hold"} })
	converge("a pod held by a finalizer", has(on("changes-b", ns+"/held", w3, w5)))
	if err := env.Client.Delete(ctx, held, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	round() // the deletion marked, the pod still there
	if err := env.Client.Patch(ctx, held, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	converge("the finalizer removed", has(on("changes-b", w3, w5)+" cpu=1000"))

	node("changes-late") // the late pod's node registers
	converge("the late node registered", has(on("changes-late", ns+"/late-0")))
}

// observe renders the snapshot as a caller sees it: each node's pods and
// requests.
func observe(s *snapshot.Snapshot) string {
	var lines []string
	for _, n := range s.Nodes {
		var pods []string
		for _, p := range n.Pods {
			pods = append(pods, p.Namespace+"/"+p.Name)
		}
		slices.Sort(pods)
		lines = append(lines, fmt.Sprintf("%s pods=%v cpu=%d count=%d", n.Name, pods, n.Requested.MilliCPU, n.PodCount()))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
