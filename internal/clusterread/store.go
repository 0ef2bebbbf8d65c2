package clusterread

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// storeOf is what client-go's shared informers offer beyond
// controller-runtime's Informer interface: their store.
type storeOf interface{ GetStore() toolscache.Store }

// fromStore returns the objects of type T in the informer cache's store:
// pointers to the cached objects themselves. A List, even without a deep
// copy, copies every object's struct into the list's items (on 5,000
// nodes x 30 pods, 150,000 pod structs each round); this copies nothing.
// ok is false when the informer offers no store (then List).
func fromStore[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, informers crcache.Informers) (out []*T, ok bool, err error) {
	inf, err := informers.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return nil, false, fmt.Errorf("getting the informer of %T: %w", new(T), err)
	}
	s, ok := inf.(storeOf)
	if !ok {
		return nil, false, nil
	}
	items := s.GetStore().List()
	out = make([]*T, 0, len(items))
	for _, it := range items {
		if o, ok := it.(*T); ok {
			out = append(out, o)
		}
	}
	return out, true, nil
}

// readStores fills out's pods (when pods is set) and nodes (when nodes
// is) from the informers' stores where they offer one; a list it fills is
// not nil.
func readStores(ctx context.Context, informers crcache.Informers, nodes, pods bool, out *Cluster) error {
	if pods {
		ps, ok, err := fromStore[corev1.Pod](ctx, informers)
		if err != nil {
			return err
		}
		if ok {
			out.Pods = ps
		}
	}
	if !nodes {
		return nil
	}
	ns, ok, err := fromStore[corev1.Node](ctx, informers)
	if err != nil {
		return err
	}
	if ok {
		out.Nodes = ns
	}
	return nil
}
