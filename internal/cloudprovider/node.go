package cloudprovider

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// NodeFor returns the node a machine of a node group's offering registers
// as: template and well-known labels, template and startup taints, the
// instance type's capacity as capacity and allocatable, and no conditions
// (it is still booting), and the owner mark (AnnotationLaunchedBy, the
// group's UID) that lets berth delete it later. Providers that create Node objects build on it;
// the provisioner uses it for nodes launched but not seen yet.
func NodeFor(ng *v1alpha1.NodeGroup, off Offering, name string) *corev1.Node {
	it, o := ng.FindOffering(off.InstanceType, off.Zone, off.CapacityType)
	if it == nil {
		return nil
	}
	labels := ng.NodeLabels(it, o)
	labels[v1alpha1.LabelHostname] = name
	capacity := it.Capacity.DeepCopy()
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = *resource.NewQuantity(v1alpha1.DefaultPodsPerNode, resource.DecimalSI)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			v1alpha1.AnnotationLaunchedBy: string(ng.UID), v1alpha1.AnnotationLaunchHash: ng.LaunchHash()}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
	for _, t := range append(append([]v1alpha1.NodeTaint{}, ng.Spec.Template.Taints...), ng.Spec.Template.StartupTaints...) {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return node
}

// NormalizeProviderID makes provider IDs that differ only in the number of
// slashes after the scheme compare equal ("aws:///zone/i-1" written by one
// component, "aws://zone/i-1" by another), as the kubelet and Cluster API
// providers do not always agree. Anything else must match exactly.
func NormalizeProviderID(id string) string {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(id), "://")
	if !ok {
		return strings.TrimSpace(id)
	}
	return scheme + "://" + strings.TrimLeft(rest, "/")
}
