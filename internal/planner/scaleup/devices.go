package scaleup

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// expectedSlices are the ResourceSlices a node of a group publishes once
// its DRA drivers run: those of its instance type. A node that is still
// booting has published none yet; planning with them keeps berth from
// launching a second node for pods the first one will take.
func expectedSlices(n *corev1.Node, ng *v1alpha1.NodeGroup) []*resourcev1.ResourceSlice {
	if ng == nil {
		return nil
	}
	for i := range ng.Spec.InstanceTypes {
		it := &ng.Spec.InstanceTypes[i]
		if it.Name == n.Labels[v1alpha1.LabelInstanceType] && len(it.Devices) > 0 {
			return it.ResourceSlices(n.Name)
		}
	}
	return nil
}
