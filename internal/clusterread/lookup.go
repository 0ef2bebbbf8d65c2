package clusterread

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/companion"
)

// Lookup answers companion.Lookup from a client (the manager's cache): the
// namespaces, claims, volumes and storage classes that decide which pods a
// CompanionProfile selects. The webhook and the companion controller both
// read through it. An object the cache does not show is read from Fresh
// (the API server), when set: a StatefulSet's claim, or a namespace,
// created a moment before the pod is not in the cache yet, and the pod
// would be taken for one no profile selects.
type Lookup struct {
	Reader client.Reader
	// Fresh reads past the cache, only where Reader found nothing (nil:
	// not read).
	Fresh client.Reader
}

var _ companion.Lookup = Lookup{}

// NamespaceLabels returns a namespace's labels, nil if it does not exist.
func (l Lookup) NamespaceLabels(ctx context.Context, name string) (labels.Set, error) {
	ns, err := l.get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	if err != nil || ns == nil {
		return nil, err
	}
	return ns.(*corev1.Namespace).Labels, nil
}

// Claim returns a PersistentVolumeClaim or nil.
func (l Lookup) Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return typed[*corev1.PersistentVolumeClaim](l.get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.PersistentVolumeClaim{}))
}

// Volume returns a PersistentVolume or nil.
func (l Lookup) Volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return typed[*corev1.PersistentVolume](l.get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{}))
}

// StorageClass returns a StorageClass or nil.
func (l Lookup) StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	return typed[*storagev1.StorageClass](l.get(ctx, client.ObjectKey{Name: name}, &storagev1.StorageClass{}))
}

// get reads obj from Reader, then from Fresh if Reader found none; nil
// when neither has it.
func (l Lookup) get(ctx context.Context, key client.ObjectKey, obj client.Object) (client.Object, error) {
	err := l.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && l.Fresh != nil {
		err = l.Fresh.Get(ctx, key, obj)
	}
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return obj, nil
}

func typed[T client.Object](obj client.Object, err error) (T, error) {
	var zero T
	if err != nil || obj == nil {
		return zero, err
	}
	return obj.(T), nil
}
