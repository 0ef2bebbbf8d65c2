package clusterread_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestThePodIndexEqualsThePodsSortedFromScratch: random sequences of pod
// events (created bound or pending, of a DaemonSet or not, bound,
// rebound, relabelled, finished, deleted, deleted by tombstone), each
// applied to a store and given to the index as an informer gives it;
// after every event a take gives the bound pods, the pods without a node
// and each DaemonSet's newest pods exactly as sorting the store's pods
// from scratch does, and its changes name what changed, read as the
// index holds it.
func TestThePodIndexEqualsThePodsSortedFromScratch(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
		w := clusterread.NewIndexedPodChanges(store)
		if _, ok := w.TakeIndexed(); !ok { // the first take: nothing named before
			t.Fatal("an index that saw every event is not taken")
		}
		version := 0
		changed := map[string]bool{}
		var lastBound []*corev1.Pod
		var lastSaid []string
		for step := range 400 {
			name := fmt.Sprintf("p-%d", r.IntN(30))
			var old *corev1.Pod
			if obj, ok, _ := store.GetByKey("default/" + name); ok {
				old = obj.(*corev1.Pod)
			}
			version++
			changed["default/"+name] = true
			var p *corev1.Pod
			switch op := r.IntN(6); {
			case old == nil || op == 0: // created (again), bound or not
				p = b.Pod(name, b.Labels("app", fmt.Sprint(r.IntN(3))))
				if r.IntN(2) == 0 {
					p.Spec.NodeName = fmt.Sprintf("n-%d", r.IntN(4))
				}
				if r.IntN(3) == 0 { // a DaemonSet's, of one of two generations, made at one of a few times
					p = b.Pod(name, b.OwnedBy("DaemonSet", fmt.Sprintf("ds-%d", r.IntN(2))), b.NodeName(p.Spec.NodeName),
						b.Labels("pod-template-generation", fmt.Sprint(1+r.IntN(2))))
					p.CreationTimestamp = metav1.NewTime(time.Unix(int64(r.IntN(5)), 0))
				}
			case op == 1: // bound, or rebound
				p = old.DeepCopy()
				p.Spec.NodeName = fmt.Sprintf("n-%d", r.IntN(4))
			case op == 2: // relabelled
				p = old.DeepCopy()
				p.Labels = map[string]string{"app": fmt.Sprint(r.IntN(3))}
			case op == 3: // finished
				p = old.DeepCopy()
				p.Status.Phase = []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}[r.IntN(2)]
			default: // deleted, by event or tombstone
				if err := store.Delete(old); err != nil {
					t.Fatal(err)
				}
				switch r.IntN(3) {
				case 0:
					w.Remove(old)
				case 1:
					w.Remove(toolscache.DeletedFinalStateUnknown{Key: "default/" + name, Obj: old})
				default: // a tombstone without the object
					w.Remove(toolscache.DeletedFinalStateUnknown{Key: "default/" + name})
				}
			}
			if p != nil {
				p.ResourceVersion = fmt.Sprint(version)
				if err := store.Update(p); err != nil {
					t.Fatal(err)
				}
				w.Put(p)
			}
			if r.IntN(3) > 0 {
				continue // takes come now and then
			}
			got, ok := w.TakeIndexed()
			if !ok {
				t.Fatalf("seed %d step %d: not taken", seed, step)
			}
			// The last take's pods are the caller's: events since did not
			// change them.
			if diff := cmp.Diff(lastSaid, describeAll(lastBound)); diff != "" {
				t.Fatalf("seed %d step %d: the last take's bound pods changed under the caller (-then +now):\n%s", seed, step, diff)
			}
			lastBound, lastSaid = got.Bound, describeAll(got.Bound)
			var wantBound, wantUnbound []string
			for _, obj := range store.List() {
				p := obj.(*corev1.Pod)
				switch {
				case podutil.IsBound(p):
					wantBound = append(wantBound, describe(p))
				case p.Spec.NodeName == "":
					wantUnbound = append(wantUnbound, describe(p))
				}
			}
			if diff := cmp.Diff(sorted(wantBound), describeAll(got.Bound)); diff != "" {
				t.Fatalf("seed %d step %d: bound pods (-from scratch +index):\n%s", seed, step, diff)
			}
			if diff := cmp.Diff(sorted(wantUnbound), describeAll(got.Unbound)); diff != "" {
				t.Fatalf("seed %d step %d: pods without a node (-from scratch +index):\n%s", seed, step, diff)
			}
			var all []*corev1.Pod
			for _, obj := range store.List() {
				all = append(all, obj.(*corev1.Pod))
			}
			if diff := cmp.Diff(describeNewest(daemonset.NewestOf(all)), describeNewest(got.DaemonSetPods)); diff != "" {
				t.Fatalf("seed %d step %d: the DaemonSets' newest pods (-from scratch +index):\n%s", seed, step, diff)
			}
			if got.Changes == nil {
				t.Fatalf("seed %d step %d: no changes", seed, step)
			}
			var named []string
			for key := range got.Changes.Pods {
				named = append(named, key.String())
			}
			var want []string
			for k := range changed {
				want = append(want, k)
			}
			if diff := cmp.Diff(sorted(want), sorted(named)); diff != "" {
				t.Fatalf("seed %d step %d: pods named (-changed +named):\n%s", seed, step, diff)
			}
			clear(changed)
			for key, p := range got.Changes.Pods {
				obj, exists, _ := store.GetByKey(key.String())
				live := exists && (podutil.IsBound(obj.(*corev1.Pod)) || obj.(*corev1.Pod).Spec.NodeName == "")
				if (p != nil) != live || (p != nil && p != obj) {
					t.Fatalf("seed %d step %d: change of %s reads %v, the store holds %v (exists %v)", seed, step, key, p, obj, exists)
				}
			}
		}
	}
}

func describe(p *corev1.Pod) string {
	return fmt.Sprintf("%s node=%s app=%s rv=%s", p.Name, p.Spec.NodeName, p.Labels["app"], p.ResourceVersion)
}

func describeAll(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, describe(p))
	}
	return sorted(out)
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// TestTheIndexIsNotTakenBeforeItSawTheInformersPods: until the handler's
// registration has seen every pod the informer held, a take gives
// nothing (the round lists the pods from the store instead).
func TestTheIndexIsNotTakenBeforeItSawTheInformersPods(t *testing.T) {
	w := clusterread.NewIndexedPodChanges(toolscache.NewStore(toolscache.MetaNamespaceKeyFunc))
	synced := false
	w.SetSynced(func() bool { return synced })
	w.Put(b.Pod("web", b.NodeName("n-1")))
	if _, ok := w.TakeIndexed(); ok {
		t.Fatal("taken before the handler saw the informer's first pods")
	}
	synced = true
	if got, ok := w.TakeIndexed(); !ok || len(got.Bound) != 1 {
		t.Fatalf("after: %+v (%v), want the one bound pod", got, ok)
	}
}

// describeNewest names each DaemonSet's newest pod of each generation by
// its name and version.
func describeNewest(n daemonset.Newest) map[string]string {
	out := map[string]string{}
	for uid, byGen := range n {
		for gen, p := range byGen {
			out[string(uid)+"/"+gen] = p.Name + "@" + p.ResourceVersion
		}
	}
	return out
}
