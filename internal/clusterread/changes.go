package clusterread

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Bounds of what PodChanges keeps between two rounds: past them it keeps
// nothing and the next round looks at every pod.
const (
	// maxObjectsKept is how many pod objects (old and new versions) the
	// changes between two rounds may hold.
	maxObjectsKept = 1_000_000
	// maxVersionsPerPod is how many versions of one pod they may hold.
	maxVersionsPerPod = 64
)

// PodChanges keeps what the pod informer's events tell between two
// rounds (snapshot.PodChanges): for each pod that changed, every object
// the events carried and the pod now, so that a round's model of the
// cluster (snapshot.Base) reads only the pods that changed. Safe for
// concurrent use: the informer calls it while a round takes the changes.
type PodChanges struct {
	mu   sync.Mutex
	seq  uint64
	pods map[types.NamespacedName]snapshot.PodChange
	kept int
	// lost: more changed than is kept; the next Take gives none.
	lost bool
}

// WatchPods starts keeping the changes of the pods in the cache.
func WatchPods(ctx context.Context, informers crcache.Informers) (*PodChanges, error) {
	inf, err := informers.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("getting the pod informer: %w", err)
	}
	w := NewPodChanges()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.Note(nil, obj) },
		UpdateFunc: w.Note,
		DeleteFunc: w.Deleted,
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	return w, nil
}

// NewPodChanges returns empty changes; Note and Deleted fill them.
func NewPodChanges() *PodChanges {
	return &PodChanges{pods: map[types.NamespacedName]snapshot.PodChange{}}
}

// Take returns the changes since the last Take and starts anew. It must
// be called before the round reads the pods (they are then as new as the
// changes, or newer). nil when changes were lost (too many were kept): a
// base then looks at every pod.
func (w *PodChanges) Take() *snapshot.PodChanges {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := &snapshot.PodChanges{From: w.seq, To: w.seq + 1, Pods: w.pods}
	lost := w.lost
	w.seq++
	w.pods, w.kept, w.lost = map[types.NamespacedName]snapshot.PodChange{}, 0, false
	if lost {
		return nil
	}
	return out
}

// Note records an added (old nil) or updated pod.
func (w *PodChanges) Note(old, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	o, _ := old.(*corev1.Pod)
	w.note(o, p, p)
}

// Deleted records a deleted pod (or the informer's tombstone of one).
func (w *PodChanges) Deleted(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		w.note(p, nil, p)
	}
}

// note appends old and now to the versions seen of the pod (each once)
// and makes now its latest.
func (w *PodChanges) note(old, now, named *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost {
		return
	}
	key := types.NamespacedName{Namespace: named.Namespace, Name: named.Name}
	c := w.pods[key]
	for _, p := range []*corev1.Pod{old, now} {
		if p != nil && (len(c.Seen) == 0 || c.Seen[len(c.Seen)-1] != p) {
			c.Seen = append(c.Seen, p)
			w.kept++
		}
	}
	c.Latest = now
	w.pods[key] = c
	if w.kept > maxObjectsKept || len(c.Seen) > maxVersionsPerPod {
		w.pods, w.kept, w.lost = map[types.NamespacedName]snapshot.PodChange{}, 0, true
	}
}
