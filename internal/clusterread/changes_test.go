package clusterread_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPodChangesKeepEveryVersionAndTheLatest: between two takes, a pod's
// versions are kept in order, each once, with the pod now (nil once
// deleted, also from a tombstone); takes are numbered one after the
// other; past the bound nothing is kept and the take says so (nil), and
// the one after it takes up again.
func TestPodChangesKeepEveryVersionAndTheLatest(t *testing.T) {
	w := clusterread.NewPodChanges()
	v1 := b.Pod("web")
	v2, v3 := v1.DeepCopy(), v1.DeepCopy()
	gone := b.Pod("gone")
	w.Note(nil, v1)
	w.Note(v1, v2)
	w.Note(v2, v3)
	w.Note(nil, gone)
	w.Deleted(toolscache.DeletedFinalStateUnknown{Key: "default/gone", Obj: gone})
	ch := w.Take()
	key := func(p *corev1.Pod) types.NamespacedName {
		return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	}
	if ch == nil || ch.From != 0 || ch.To != 1 {
		t.Fatalf("first take: %+v, want changes 0 -> 1", ch)
	}
	web := ch.Pods[key(v1)]
	if !slices.Equal(web.Seen, []*corev1.Pod{v1, v2, v3}) || web.Latest != v3 {
		t.Errorf("web: seen %d versions, latest the third: %v; want v1, v2, v3 and v3", len(web.Seen), web.Latest == v3)
	}
	if g := ch.Pods[key(gone)]; !slices.Equal(g.Seen, []*corev1.Pod{gone}) || g.Latest != nil {
		t.Errorf("gone: %+v, want seen once and no latest", g)
	}
	if ch := w.Take(); ch == nil || ch.From != 1 || len(ch.Pods) != 0 {
		t.Fatalf("second take: %+v, want no change from 1", ch)
	}
	for i := range 70 { // more versions of one pod than are kept
		next := v1.DeepCopy()
		next.ResourceVersion = fmt.Sprint(i)
		w.Note(v3, next)
		v3 = next
	}
	if ch := w.Take(); ch != nil {
		t.Fatalf("a take after too many versions gave %d changes, want none (nil)", len(ch.Pods))
	}
	w.Note(nil, v1)
	if ch := w.Take(); ch == nil || ch.From != 3 || len(ch.Pods) != 1 {
		t.Fatalf("the take after: %+v, want one change from 3", ch)
	}
}

// TestPodChangesKeepABaseEqualToTheCluster drives pods on a real API
// server (created, relabelled, resized by a new pod of the same name,
// bound to a node that registers later, finished, deleted) and plans
// rounds as the provisioner does: the changes taken, then the pods read
// from the informer's store, then the base brought up to date from the
// changes. Once the events are in, the base is the cluster built from
// scratch, and it got there from the changes, not by looking at every
// pod.
func TestPodChangesKeepABaseEqualToTheCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "changes"
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
	w, err := clusterread.WatchPods(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	base := snapshot.NewBase()
	round := func() (string, string) {
		t.Helper()
		ch := w.Take()
		cl, err := clusterread.Read(ctx, cache, clusterread.Parts{SharedNodes: true, Informers: cache})
		if err != nil {
			t.Fatal(err)
		}
		in := snapshot.Input{Pods: cl.Pods, Namespaces: cl.Namespaces, Changes: ch}
		for _, n := range cl.Nodes {
			in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
		}
		s, err := base.Snapshot(in)
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
	converge := func(step string) {
		t.Helper()
		var want, got string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if want, got = round(); want == got && strings.Contains(want, "pods=") {
				return
			}
		}
		t.Fatalf("%s: the base did not come to the cluster built from scratch (-scratch +base):\n%s", step, cmp.Diff(want, got))
	}
	node := func(name string) {
		t.Helper()
		n := b.Node(name, "8", "32Gi")
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	}
	pod := func(name, node, cpu string) *corev1.Pod {
		t.Helper()
		p := b.Pod(name, b.NoUID(), b.Namespace(ns), b.NodeName(node), b.CPU(cpu), b.Labels("app", "web"))
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	node("changes-a")
	node("changes-b")
	var pods []*corev1.Pod
	for i := range 6 {
		pods = append(pods, pod(fmt.Sprintf("web-%d", i), []string{"changes-a", "changes-b"}[i%2], "500m"))
	}
	converge("pods created")
	syncs := base.FromChanges

	pods[0].Labels["app"] = "api"
	if err := env.Client.Update(ctx, pods[0]); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, pods[1], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	pod("web-1", "changes-a", "2") // made again, bigger, elsewhere
	pod("late-0", "changes-late", "1")
	pods[2].Status.Phase = corev1.PodSucceeded
	if err := env.Client.Status().Update(ctx, pods[2]); err != nil {
		t.Fatal(err)
	}
	converge("pods changed")
	node("changes-late") // the late pod's node registers
	converge("the late node registered")
	if base.FromChanges <= syncs {
		t.Errorf("the base came up to date from the changes in %d rounds (%d before the changes): it looked at every pod instead", base.FromChanges, syncs)
	}
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
