package clusterread

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// maxChangedPods bounds how many pods PodChanges names between two
// rounds: past it, it names none and the next round looks at every pod.
const maxChangedPods = 1_000_000

// PodChanges names the pods the pod informer's events named since the
// last round, and reads each one from the informer's store when a round
// takes them (snapshot.PodChanges), so that a round's model of the
// cluster (snapshot.Base) reads only the pods that changed. It keeps
// names only: what it holds is bounded by the number of pods, whatever
// the events carried. Safe for concurrent use: the informer calls it
// while a round takes the changes.
type PodChanges struct {
	store toolscache.Store
	max   int // maxChangedPods
	mu    sync.Mutex
	seq   uint64
	names map[types.NamespacedName]struct{}
	// lost: more pods changed than are named; the next Take gives none.
	lost bool
	// taking: a round has taken changes. Before, nothing is named (a
	// replica that is not the leader runs no round).
	taking bool
	// index sorts the pods of the events Put and Remove give (nil: not
	// kept, TakeIndexed gives nothing); synced says whether it has seen
	// every pod the informer held when it was registered (nil: yes).
	index  *podIndex
	synced func() bool
}

// WatchPods starts naming the pods that change in the cache and filing
// them in the index, then calls then's functions with each event (so that
// what then triggers sees the index with the pod: a separate handler of
// the same informer may be called before this one). It returns nil when
// the pod informer offers no store to read them from (a round then looks
// at every pod; then is not called).
func WatchPods(ctx context.Context, informers crcache.Informers, then toolscache.ResourceEventHandlerFuncs) (*PodChanges, error) {
	inf, err := informers.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("getting the pod informer: %w", err)
	}
	s, ok := inf.(storeOf)
	if !ok {
		return nil, nil
	}
	w := NewPodChanges(s.GetStore())
	w.index = newPodIndex()
	w.synced = func() bool { return false } // until the handler is registered
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			w.Put(obj)
			then.OnAdd(obj, false)
		},
		UpdateFunc: func(old, obj any) {
			w.Put(obj)
			then.OnUpdate(old, obj)
		},
		DeleteFunc: func(obj any) {
			w.Remove(obj)
			then.OnDelete(obj)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	w.mu.Lock()
	w.synced = reg.HasSynced
	w.mu.Unlock()
	return w, nil
}

// NewIndexedPodChanges is NewPodChanges that also sorts the pods of the
// events Put and Remove give, for TakeIndexed.
func NewIndexedPodChanges(store toolscache.Store) *PodChanges {
	w := NewPodChanges(store)
	w.index = newPodIndex()
	return w
}

// Put names the pod of an add or update event and files it in the index.
func (w *PodChanges) Put(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.index != nil {
		w.index.put(p)
	}
	w.name(p)
}

// Remove names the pod of a delete event (or its tombstone, by its key
// when it carries no pod) and takes it out of the index.
func (w *PodChanges) Remove(obj any) {
	var key types.NamespacedName
	switch o := obj.(type) {
	case *corev1.Pod:
		key = podKey(o)
	case toolscache.DeletedFinalStateUnknown:
		if p, ok := o.Obj.(*corev1.Pod); ok {
			key = podKey(p)
		} else if ns, name, err := toolscache.SplitMetaNamespaceKey(o.Key); err == nil {
			key = types.NamespacedName{Namespace: ns, Name: name}
		} else {
			return
		}
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.index != nil {
		w.index.remove(key)
	}
	w.nameKey(key)
}

// NewPodChanges returns changes read from store (pods keyed
// namespace/name, as an informer's are); Note names the pods. Its changes
// are numbered from a point of their own (the time it was made), so that
// they never seem to follow another's.
func NewPodChanges(store toolscache.Store) *PodChanges {
	return &PodChanges{store: store, max: maxChangedPods, seq: uint64(time.Now().UnixNano()), names: map[types.NamespacedName]struct{}{}}
}

// Note names the pod of an event: added, updated or deleted (the
// informer's tombstone of one too).
func (w *PodChanges) Note(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.name(p)
}

// name names p; w.mu is held.
func (w *PodChanges) name(p *corev1.Pod) { w.nameKey(podKey(p)) }

// nameKey names the pod of key; w.mu is held.
func (w *PodChanges) nameKey(key types.NamespacedName) {
	if w.lost || !w.taking {
		return
	}
	w.names[key] = struct{}{}
	if len(w.names) > w.max {
		w.names, w.lost = map[types.NamespacedName]struct{}{}, true
	}
}

// Take returns the pods named since the last Take, each as the store
// holds it now (nil once gone), and starts anew. It must be called
// before the round reads the pods (they are then as new as the changes,
// or newer). nil when names were lost, and the first time (nothing was
// named before): a base then looks at every pod.
func (w *PodChanges) Take() *snapshot.PodChanges {
	w.mu.Lock()
	names, lost := w.names, w.lost || !w.taking
	w.names, w.lost, w.taking = map[types.NamespacedName]struct{}{}, false, true
	from := w.seq
	w.seq++
	w.mu.Unlock()
	if lost {
		return nil
	}
	out := &snapshot.PodChanges{From: from, To: from + 1, Pods: make(map[types.NamespacedName]*corev1.Pod, len(names))}
	for key := range names {
		obj, ok, err := w.store.GetByKey(key.Namespace + "/" + key.Name)
		if err != nil {
			return nil // not known: the round looks at every pod
		}
		var p *corev1.Pod
		if ok {
			p, _ = obj.(*corev1.Pod)
		}
		out.Pods[key] = p
	}
	return out
}
