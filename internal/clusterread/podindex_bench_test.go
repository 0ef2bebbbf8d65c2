package clusterread_test

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// BenchmarkRoundPods is how a provisioning round gets the pods of 5,000
// nodes x 30 running pods (3 of each node's of DaemonSets) and 10 pending
// ones, sorted into bound and without a node: from the informer's store,
// every pod looked at (as rounds did), or from the index the informer's
// events keep (PodChanges.TakeIndexed), a pod of each DaemonSet changed
// before each round.
func BenchmarkRoundPods(bb *testing.B) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	var changing []*corev1.Pod // a pod of each DaemonSet, which changes before every round
	for n := range 5000 {
		for i := range 30 {
			p := b.Pod(fmt.Sprintf("p-%d-%d", n, i), b.Namespace(fmt.Sprintf("ns-%d", i)), b.NodeName(fmt.Sprintf("node-%d", n)),
				b.CPU("450m"), b.Phase(corev1.PodRunning))
			if i < 3 { // three DaemonSets' pods on every node
				b.OwnedBy("DaemonSet", fmt.Sprintf("ds-%d", i))(p)
				if n == 0 {
					changing = append(changing, p)
				}
			}
			_ = store.Add(p)
		}
	}
	for i := range 10 {
		_ = store.Add(b.Pod(fmt.Sprintf("pending-%d", i), b.CPU("1")))
	}
	// The index's own memory (B/pod): what it holds beside the store.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := clusterread.NewIndexedPodChanges(store)
	for _, obj := range store.List() {
		w.Put(obj)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPod := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(store.List()))
	bb.Run("store", func(bb *testing.B) {
		for bb.Loop() {
			var bound, other []*corev1.Pod
			for _, obj := range store.List() {
				p := obj.(*corev1.Pod)
				if podutil.IsBound(p) {
					bound = append(bound, p)
				} else {
					other = append(other, p)
				}
			}
			if len(bound) != 150000 || len(other) != 10 {
				bb.Fatalf("%d bound, %d others", len(bound), len(other))
			}
		}
	})
	bb.Run("index", func(bb *testing.B) {
		for bb.Loop() {
			for _, p := range changing {
				w.Put(p)
			}
			ix, ok := w.TakeIndexed()
			if !ok || len(ix.Bound) != 150000 || len(ix.Unbound) != 10 {
				bb.Fatalf("%d bound, %d others", len(ix.Bound), len(ix.Unbound))
			}
		}
		bb.ReportMetric(perPod, "index-B/pod")
	})
	runtime.KeepAlive(w)
}
