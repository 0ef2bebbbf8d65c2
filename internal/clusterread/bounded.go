package clusterread

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/quantity"
)

// Bounded returns c with the quantities of every object it reads bounded
// as the controller's cache bounds them (quantity.BoundObject). The
// commands that read the API server without a cache (berth explain,
// berth tenant, berth cleanup) use it, so that a pod the
// API server stored with a cpu request of 1e3000000 costs them no more
// than any other pod. Writes go to c unchanged.
func Bounded(c client.Client) client.Client { return bounded{c} }

type bounded struct{ client.Client }

// Get reads obj and bounds its quantities.
func (b bounded) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := b.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	quantity.BoundObject(obj)
	return nil
}

// List reads list and bounds the quantities of its items.
func (b bounded) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := b.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		quantity.BoundObject(o)
		return nil
	})
}
