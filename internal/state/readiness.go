package state

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// UnitsOwner is the kind of object whose units readiness counts.
type UnitsOwner string

// The kinds of object that own headroom units.
const (
	OwnerHeadroom       UnitsOwner = "Headroom"
	OwnerCapacityBuffer UnitsOwner = "CapacityBuffer"
)

// Key names a Headroom (no namespace) or a CapacityBuffer.
type Key struct {
	Owner UnitsOwner
	types.NamespacedName
}

// Readiness holds, per headroom or capacity buffer, how many of its units
// fit in free capacity of Ready nodes in the provisioner's latest plan. The
// provisioner writes it; the headroom and buffer controllers read it for
// status. Safe for concurrent use.
type Readiness struct {
	mu    sync.Mutex
	ready map[Key]int32
	// OnChange, if set, is called (outside the lock) with the key of every
	// entry whose value changed.
	OnChange func(key Key)
}

// NewReadiness returns an empty store.
func NewReadiness() *Readiness { return &Readiness{ready: map[Key]int32{}} }

// HeadroomKey is the key of a Headroom.
func HeadroomKey(name string) Key {
	return Key{Owner: OwnerHeadroom, NamespacedName: types.NamespacedName{Name: name}}
}

// BufferKey is the key of a CapacityBuffer.
func BufferKey(namespace, name string) Key {
	return Key{Owner: OwnerCapacityBuffer, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// Set replaces all entries with the given ones.
func (r *Readiness) Set(ready map[Key]int32) {
	r.mu.Lock()
	var changed []Key
	for k, v := range ready {
		if old, ok := r.ready[k]; !ok || old != v {
			changed = append(changed, k)
		}
	}
	for k := range r.ready {
		if _, ok := ready[k]; !ok {
			changed = append(changed, k)
		}
	}
	r.ready = ready
	r.mu.Unlock()
	if r.OnChange != nil {
		for _, k := range changed {
			r.OnChange(k)
		}
	}
}

// Get returns the ready units of a key and whether the provisioner has
// planned for it.
func (r *Readiness) Get(key Key) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.ready[key]
	return v, ok
}
