package state

import (
	"strings"
	"sync"
)

// Readiness holds, per headroom or capacity buffer, how many of its units
// fit in free capacity of Ready nodes in the provisioner's latest plan. The
// provisioner writes it; the headroom and buffer controllers read it for
// status. Safe for concurrent use.
type Readiness struct {
	mu    sync.Mutex
	ready map[string]int32
	// OnChange, if set, is called (outside the lock) with the key of every
	// entry whose value changed.
	OnChange func(key string)
}

// NewReadiness returns an empty store.
func NewReadiness() *Readiness { return &Readiness{ready: map[string]int32{}} }

// HeadroomKey is the key of a Headroom.
func HeadroomKey(name string) string { return "headroom/" + name }

// BufferKey is the key of a CapacityBuffer.
func BufferKey(namespace, name string) string { return "buffer/" + namespace + "/" + name }

// Set replaces all entries with the given ones.
func (r *Readiness) Set(ready map[string]int32) {
	r.mu.Lock()
	var changed []string
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
func (r *Readiness) Get(key string) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.ready[key]
	return v, ok
}

// ParseKey splits a key into its kind ("headroom" or "buffer"), namespace
// (empty for a headroom) and name.
func ParseKey(key string) (kind, namespace, name string) {
	kind, rest, _ := strings.Cut(key, "/")
	if kind == "buffer" {
		namespace, name, _ = strings.Cut(rest, "/")
		return kind, namespace, name
	}
	return kind, "", rest
}
