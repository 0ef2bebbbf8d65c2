// Package notify lets code outside a controller ask it to reconcile an
// object, through a controller-runtime channel source.
package notify

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Channel queues reconcile requests for a controller.
type Channel struct {
	ch chan event.TypedGenericEvent[client.Object]
}

// New returns a channel with room for size pending requests.
func New(size int) *Channel {
	return &Channel{ch: make(chan event.TypedGenericEvent[client.Object], size)}
}

// Notify queues a reconcile of obj (only its name and namespace matter).
// It never blocks: when the queue is full the request is dropped, and the
// controller's next resync or event catches up.
func (c *Channel) Notify(obj client.Object) {
	select {
	case c.ch <- event.TypedGenericEvent[client.Object]{Object: obj}:
	default:
	}
}

// Source is the controller-runtime source to watch.
func (c *Channel) Source() source.Source {
	return source.Channel(c.ch, &handler.EnqueueRequestForObject{})
}
