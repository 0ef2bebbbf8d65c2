package provisioning

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// announcer records an event on an object only when what berth says about
// it changed: a pending pod hears once that a node is launched for it, not
// every round. Keys are the caller's (a pod's UID, a headroom's key). Safe
// for concurrent use: launches run in parallel.
type announcer[K comparable] struct {
	recorder events.EventRecorder
	mu       sync.Mutex
	last     map[K]string
}

func newAnnouncer[K comparable](r events.EventRecorder) *announcer[K] {
	return &announcer[K]{recorder: r, last: map[K]string{}}
}

// say records the event unless msg is the last thing said under key.
func (a *announcer[K]) say(key K, obj runtime.Object, eventType, reason, action, msg string) {
	a.mu.Lock()
	same := a.last[key] == msg
	a.last[key] = msg
	a.mu.Unlock()
	if !same {
		a.recorder.Eventf(obj, nil, eventType, reason, action, "%s", msg)
	}
}

// retain forgets the keys keep returns false for (objects gone, pods no
// longer pending): the map never outgrows what is live.
func (a *announcer[K]) retain(keep func(K) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.last {
		if !keep(k) {
			delete(a.last, k)
		}
	}
}
