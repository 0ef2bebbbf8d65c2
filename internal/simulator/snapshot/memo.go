package snapshot

import (
	"hash/maphash"

	corev1 "k8s.io/api/core/v1"
)

// Memo carries, from one snapshot build to the next, the fingerprint of
// every bound pod version it saw (as the snapshot classifies the pods it
// places: without their node): a controller that builds a snapshot each
// round from its informer cache fingerprints only the pods that changed
// since the last one. A version is the pod's UID, resourceVersion and node
// name (the API server gives every change a new resourceVersion; the node
// name is in the key because a planner holds a pending pod on its
// nominated node in a copy). Only bound pods (spec.nodeName set), the
// bulk of a cluster, are memoised: pending ones are few, and planners
// change them in memory (a leader carrying its followers, a narrowed node
// selection) without a new resourceVersion. Pods without a UID or
// resourceVersion, and pods with resource claims (whose fingerprint reads
// the claims, not only the pod), are fingerprinted each time. The memo
// keeps what the last two builds used, a hash of the version and the
// fingerprint (16 bytes and the map's overhead per pod), so it never
// grows beyond the pods of the cluster. Not safe for concurrent builds:
// one per controller.
type Memo struct {
	seed       maphash.Seed
	prev, next map[uint64]uint64
	// Hits and Misses count lookups since the memo was made, for tests and
	// benchmarks.
	Hits, Misses int
}

// NewMemo returns an empty memo.
func NewMemo() *Memo {
	return &Memo{seed: maphash.MakeSeed(), next: map[uint64]uint64{}}
}

// startBuild begins a snapshot build: what the previous build used stays
// reachable, anything older is dropped.
func (m *Memo) startBuild() {
	if m.prev == nil {
		m.prev = make(map[uint64]uint64, len(m.next))
	}
	m.prev, m.next = m.next, m.prev
	clear(m.next) // the two maps are reused: a round allocates none
}

// sum returns the pod's fingerprint, from the memo when it saw this
// version.
func (m *Memo) sum(f *fingerprinter, p *corev1.Pod) uint64 {
	if p.Spec.NodeName == "" || p.UID == "" || p.ResourceVersion == "" || len(p.Spec.ResourceClaims) > 0 {
		return f.sum(p, true)
	}
	var h maphash.Hash
	h.SetSeed(m.seed)
	_, _ = h.WriteString(string(p.UID))
	_ = h.WriteByte(0)
	_, _ = h.WriteString(p.ResourceVersion)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(p.Spec.NodeName)
	v := h.Sum64()
	// Only prev is looked in: a build sees each pod once, so next holds
	// what this build already passed (a pod seen twice is summed twice).
	sum, ok := m.prev[v]
	if ok {
		m.Hits++
	} else {
		m.Misses++
		sum = f.sum(p, true)
	}
	m.next[v] = sum
	return sum
}
