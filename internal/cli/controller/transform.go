package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// trimCached drops from every object the informer cache holds what berth
// never reads, before it is stored: managedFields everywhere, the
// container statuses of pods and the image list of nodes. On a large
// cluster the cache is most of the controller's memory (a pod's container
// statuses and a node's images are often larger than the rest of it).
// Patches are computed between two copies of a trimmed object, so they
// never send the missing fields; pods and nodes are never updated whole.
func trimCached(obj any) (any, error) {
	obj, err := crcache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Status.ContainerStatuses = nil
		o.Status.InitContainerStatuses = nil
		o.Status.EphemeralContainerStatuses = nil
	case *corev1.Node:
		o.Status.Images = nil
	}
	return obj, nil
}

var _ cache.TransformFunc = trimCached
