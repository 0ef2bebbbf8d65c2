package clusterread

import "k8s.io/apimachinery/pkg/types"

// SetMaxChangedPods lowers the bound of the pods named between two takes.
func (w *PodChanges) SetMaxChangedPods(n int) { w.max = n }

// IndexHolds reports whether the index holds a pod of that name.
func (w *PodChanges) IndexHolds(namespace, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index != nil && w.index.get(types.NamespacedName{Namespace: namespace, Name: name}) != nil
}

// SetSynced replaces the index's view of whether its handler has seen
// the informer's first pods.
func (w *PodChanges) SetSynced(synced func() bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced = synced
}
