// Package builders makes Kubernetes and berth objects for tests with short,
// readable calls: builders.Pod("web", builders.CPU("500m")).
package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// NodeGroupOption changes a NodeGroup under construction.
type NodeGroupOption func(*v1alpha1.NodeGroup)

// NodeGroup returns a valid KWOK NodeGroup with min 0 and max 10; with no
// InstanceType option it gets one type "standard-2" (2 cpu, 4Gi) offered
// on-demand in zone-a at 0.1 per hour.
func NodeGroup(name string, opts ...NodeGroupOption) *v1alpha1.NodeGroup {
	ng := &v1alpha1.NodeGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeGroupSpec{
			MaxSize:  10,
			Provider: v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{}},
		},
	}
	for _, o := range opts {
		o(ng)
	}
	if len(ng.Spec.InstanceTypes) == 0 {
		InstanceType("standard-2", "2", "4Gi", OnDemand("zone-a", "0.1"))(ng)
	}
	return ng
}

// Size sets min and max size.
func Size(minSize, maxSize int32) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) { ng.Spec.MinSize, ng.Spec.MaxSize = minSize, maxSize }
}

// TemplateLabel adds a label to the node template.
func TemplateLabel(key, value string) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) {
		if ng.Spec.Template.Labels == nil {
			ng.Spec.Template.Labels = map[string]v1alpha1.LabelValue{}
		}
		ng.Spec.Template.Labels[key] = v1alpha1.LabelValue(value)
	}
}

// TemplateTaint adds a taint to the node template.
func TemplateTaint(key, value string, effect corev1.TaintEffect) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Template.Taints = append(ng.Spec.Template.Taints, v1alpha1.NodeTaint{Key: key, Value: value, Effect: v1alpha1.TaintEffect(effect)})
	}
}

// GroupLimits caps the group's total resources.
func GroupLimits(rl corev1.ResourceList) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) { ng.Spec.Limits = rl }
}

// LaunchDelay sets the KWOK provider's launch delay.
func LaunchDelay(d metav1.Duration) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) { ng.Spec.Provider.KWOK.LaunchDelay = &d }
}

// FailOffering makes launches of matching offerings fail.
func FailOffering(sel v1alpha1.OfferingSelector) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Provider.KWOK.FailOfferings = append(ng.Spec.Provider.KWOK.FailOfferings, sel)
	}
}

// InstanceType adds an instance type with cpu and memory capacity, 110 pods,
// and the given offerings. Extra capacity comes from Capacity options.
func InstanceType(name, cpu, memory string, offerings ...v1alpha1.Offering) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = append(ng.Spec.InstanceTypes, v1alpha1.InstanceType{
			Name: name,
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Architecture: "amd64",
			Offerings:    offerings,
		})
	}
}

// ExtraCapacity adds a resource to the last instance type added.
func ExtraCapacity(name corev1.ResourceName, q string) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) {
		it := &ng.Spec.InstanceTypes[len(ng.Spec.InstanceTypes)-1]
		it.Capacity[name] = resource.MustParse(q)
	}
}

// OnDemand is an on-demand offering.
func OnDemand(zone, price string) v1alpha1.Offering {
	return v1alpha1.Offering{Zone: zone, CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: price}
}

// Spot is a spot offering.
func Spot(zone, price string) v1alpha1.Offering {
	return v1alpha1.Offering{Zone: zone, CapacityType: v1alpha1.CapacityTypeSpot, PricePerHour: price}
}
