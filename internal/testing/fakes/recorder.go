// Package fakes holds small test doubles for side channels (events). The
// behaviour they stand in for is covered by end-to-end tests.
package fakes

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Event is one recorded event.
type Event struct {
	Object  string // namespace/name of the regarding object, or name if cluster-scoped
	Type    string
	Reason  string
	Message string
}

// Recorder records events in memory.
type Recorder struct {
	mu     sync.Mutex
	Events []Event
}

// Eventf records an event.
func (r *Recorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _ string, note string, args ...interface{}) {
	name := ""
	if m, err := meta.Accessor(regarding); err == nil {
		name = m.GetName()
		if m.GetNamespace() != "" {
			name = m.GetNamespace() + "/" + name
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Events = append(r.Events, Event{Object: name, Type: eventtype, Reason: reason, Message: fmt.Sprintf(note, args...)})
}

// For returns the events recorded on an object (namespace/name, or name).
func (r *Recorder) For(name string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.Events {
		if e.Object == name {
			out = append(out, e)
		}
	}
	return out
}
