package clusterread

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/companion"
)

// Lookup answers companion.Lookup from a client (the manager's cache): the
// namespaces, claims, volumes and storage classes that decide which pods a
// CompanionProfile selects. The webhook and the companion controller both
// read through it.
type Lookup struct{ Reader client.Reader }

var _ companion.Lookup = Lookup{}

// NamespaceLabels returns a namespace's labels, nil if it does not exist.
func (l Lookup) NamespaceLabels(ctx context.Context, name string) (labels.Set, error) {
	ns := &corev1.Namespace{}
	if err := l.Reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns.Labels, nil
}

// Claim returns a PersistentVolumeClaim or nil.
func (l Lookup) Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return get(ctx, l.Reader, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.PersistentVolumeClaim{})
}

// Volume returns a PersistentVolume or nil.
func (l Lookup) Volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return get(ctx, l.Reader, client.ObjectKey{Name: name}, &corev1.PersistentVolume{})
}

// StorageClass returns a StorageClass or nil.
func (l Lookup) StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	return get(ctx, l.Reader, client.ObjectKey{Name: name}, &storagev1.StorageClass{})
}

func get[T client.Object](ctx context.Context, r client.Reader, key client.ObjectKey, obj T) (T, error) {
	var zero T
	if err := r.Get(ctx, key, obj); err != nil {
		return zero, client.IgnoreNotFound(err)
	}
	return obj, nil
}
