package clusterapi

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// AnnotationPaused on a Cluster API object stops its controllers from
// acting on it: a replica added makes no Machine, one taken away deletes
// none.
const AnnotationPaused = "cluster.x-k8s.io/paused"

// unscalable says why berth does not change the replicas of the group's
// object, "" when it does: the object is paused, or it is a MachineSet a
// MachineDeployment controls (its controller sets the replicas back to
// the MachineDeployment's: the Machines berth adds are deleted again, and
// a Machine berth marks is replaced). Cluster Autoscaler leaves such
// objects out of its node groups.
func unscalable(obj *unstructured.Unstructured) string {
	if _, ok := obj.GetAnnotations()[AnnotationPaused]; ok {
		return "it is paused (" + AnnotationPaused + ")"
	}
	if obj.GetKind() == string(v1alpha1.ClusterAPIMachineSet) {
		for _, o := range obj.GetOwnerReferences() {
			if o.Kind == string(v1alpha1.ClusterAPIMachineDeployment) && o.Controller != nil && *o.Controller {
				return fmt.Sprintf("MachineDeployment %s controls it and sets its replicas: point the node group at the MachineDeployment", o.Name)
			}
		}
	}
	return ""
}

// hold keeps the group at the object's replicas (minSize and maxSize
// both): nothing is planned to launch or remove while the object cannot
// be scaled (unscalable), so no node is drained for a removal its
// provider would refuse.
func hold(ng *v1alpha1.NodeGroup, obj *unstructured.Unstructured) {
	replicas, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil || !found {
		replicas = 0
	}
	n := int32(min(max(replicas, 0), math.MaxInt32))
	ng.Spec.MinSize, ng.Spec.MaxSize = n, n
}

// holdRemovals keeps the group from going below what it has (minSize
// raised to the object's replicas, or to its live Machines where fewer,
// within maxSize): launches go on, nothing is planned to be removed
// while Cluster API would refuse the removal (removalsRefused), and no
// node is launched only to reach that minSize.
func holdRemovals(ng *v1alpha1.NodeGroup, obj *unstructured.Unstructured, live int) {
	replicas, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil || !found {
		return
	}
	n := int32(min(max(replicas, 0), int64(live), math.MaxInt32))
	ng.Spec.MinSize = max(ng.Spec.MinSize, min(n, ng.Spec.MaxSize))
}
