package clusterread

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// podIndex sorts the pods the informer's events name as they come: those
// bound to a node (podutil.IsBound) in a list, those without a node in a
// set; bound pods that finished are in neither. A round then takes the
// bound ones as one copy of the list and looks only at the others,
// instead of listing every pod and looking at each (on 5,000 nodes x 30
// pods, 150,000 pods whose memory a round would touch).
type podIndex struct {
	bound   []*corev1.Pod
	boundAt map[types.NamespacedName]int
	unbound map[types.NamespacedName]*corev1.Pod
	// daemons are the pods of each DaemonSet (by its UID), finished ones
	// too, and daemonOf the DaemonSet of each; newest is the choice among
	// them (daemonset.Newest), kept as pods come, and made again among all
	// of a DaemonSet's pods at a take when a pod chosen changed or went
	// (stale).
	daemons  map[types.UID]map[types.NamespacedName]*corev1.Pod
	daemonOf map[types.NamespacedName]types.UID
	newest   daemonset.Newest
	stale    map[types.UID]bool
}

func newPodIndex() *podIndex {
	return &podIndex{boundAt: map[types.NamespacedName]int{}, unbound: map[types.NamespacedName]*corev1.Pod{},
		daemons: map[types.UID]map[types.NamespacedName]*corev1.Pod{}, daemonOf: map[types.NamespacedName]types.UID{},
		newest: daemonset.Newest{}, stale: map[types.UID]bool{}}
}

func podKey(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// put files the pod as it is now.
func (x *podIndex) put(p *corev1.Pod) {
	key := podKey(p)
	x.remove(key)
	switch {
	case podutil.IsBound(p):
		x.boundAt[key] = len(x.bound)
		x.bound = append(x.bound, p)
	case p.Spec.NodeName == "":
		x.unbound[key] = p
	}
	if ref := podutil.DaemonSetOf(p); ref != nil {
		uid := ref.UID
		if x.daemons[uid] == nil {
			x.daemons[uid] = map[types.NamespacedName]*corev1.Pod{}
		}
		x.daemons[uid][key] = p
		x.daemonOf[key] = uid
		if !x.stale[uid] {
			x.newest.Add(p)
		}
	}
}

// remove forgets the pod of key: O(1), the last bound pod takes its
// place in the list.
func (x *podIndex) remove(key types.NamespacedName) {
	delete(x.unbound, key)
	if uid, ok := x.daemonOf[key]; ok {
		old := x.daemons[uid][key]
		delete(x.daemonOf, key)
		delete(x.daemons[uid], key)
		if len(x.daemons[uid]) == 0 {
			delete(x.daemons, uid)
		}
		// Only the choice among the DaemonSet's pods is to be made
		// again, and only when it was this pod.
		if x.newest.Chose(old) {
			x.stale[uid] = true
		}
	}
	i, ok := x.boundAt[key]
	if !ok {
		return
	}
	last := len(x.bound) - 1
	moved := x.bound[last]
	x.bound[i] = moved
	x.boundAt[podKey(moved)] = i
	x.bound[last] = nil
	x.bound = x.bound[:last]
	delete(x.boundAt, key)
}

// daemonSetPods are the newest pods of each DaemonSet (a copy the
// caller may keep), chosen again among all the pods of a DaemonSet whose
// pod chosen changed or went since the last call.
func (x *podIndex) daemonSetPods() daemonset.Newest {
	for uid := range x.stale {
		delete(x.newest, uid)
		for _, p := range x.daemons[uid] {
			x.newest.Add(p)
		}
	}
	clear(x.stale)
	return x.newest.Clone()
}

// get is the pod of key the index holds; nil for none, or one bound that
// finished.
func (x *podIndex) get(key types.NamespacedName) *corev1.Pod {
	if i, ok := x.boundAt[key]; ok {
		return x.bound[i]
	}
	return x.unbound[key]
}

// Indexed is what TakeIndexed gives a round: the changes since the last
// take and the pods, all as the events handled so far left them.
type Indexed struct {
	// Changes are as Take's, read from the index (nil when names were
	// lost, and the first time).
	Changes *snapshot.PodChanges
	// Bound are the pods bound to a node and not finished (a copy of the
	// list: the caller may keep it); Unbound the pods without a node.
	Bound, Unbound []*corev1.Pod
	// DaemonSetPods are the newest pods of each DaemonSet, for
	// daemonset.AsRun.
	DaemonSetPods daemonset.Newest
}

// TakeIndexed is Take with the pods: the changes and the pods are read
// from the index under one lock, so that they agree (an event handled
// after it is named by the next take). ok is false until the index has
// seen every pod the informer held when it was registered (then the
// caller lists them, and takes changes with Take).
func (w *PodChanges) TakeIndexed() (Indexed, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.index == nil || (w.synced != nil && !w.synced()) {
		return Indexed{}, false
	}
	names, lost := w.names, w.lost || !w.taking
	w.names, w.lost, w.taking = map[types.NamespacedName]struct{}{}, false, true
	from := w.seq
	w.seq++
	out := Indexed{Bound: slices.Clone(w.index.bound), Unbound: make([]*corev1.Pod, 0, len(w.index.unbound)),
		DaemonSetPods: w.index.daemonSetPods()}
	for _, p := range w.index.unbound {
		out.Unbound = append(out.Unbound, p)
	}
	if lost {
		return out, true
	}
	out.Changes = &snapshot.PodChanges{From: from, To: from + 1, Pods: make(map[types.NamespacedName]*corev1.Pod, len(names))}
	for key := range names {
		out.Changes.Pods[key] = w.index.get(key)
	}
	return out, true
}
