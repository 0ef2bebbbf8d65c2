package builders

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Devices adds to the group's last instance type the devices a DRA driver
// publishes on each of its nodes: count devices named <prefix>-0, ... with
// the given string attributes.
func Devices(driver, prefix string, count int, attrs map[string]string) NodeGroupOption {
	return func(ng *v1alpha1.NodeGroup) {
		it := &ng.Spec.InstanceTypes[len(ng.Spec.InstanceTypes)-1]
		d := v1alpha1.DeviceDriver{Driver: driver}
		for i := range count {
			dev := resourcev1.Device{Name: fmt.Sprintf("%s-%d", prefix, i), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}}
			for k, v := range attrs {
				dev.Attributes[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{StringValue: ptr.To(v)}
			}
			d.Devices = append(d.Devices, dev)
		}
		it.Devices = append(it.Devices, d)
	}
}

// DeviceClass is a DeviceClass selecting every device of a driver.
func DeviceClass(name, driver string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{
			{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}},
		}},
	}
}

// DeviceRequest asks for count devices of a class, each matching every
// CEL selector given.
func DeviceRequest(name, class string, count int64, cel ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
	}}
	for _, e := range cel {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return r
}

// ClaimTemplate is a ResourceClaimTemplate in namespace default.
func ClaimTemplate(name string, requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: requests},
		}},
	}
}

// Claim is a ResourceClaim in namespace default.
func Claim(name string, requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-claim-" + name)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}},
	}
}

// AllocatedOn marks a claim allocated on devices of a node's pool (the
// node's name), reserved for reservations consumers.
func AllocatedOn(c *resourcev1.ResourceClaim, driver, node string, reservations int, devices ...string) *resourcev1.ResourceClaim {
	a := &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: c.Spec.Devices.Requests[0].Name, Driver: driver, Pool: node, Device: d,
		})
	}
	c.Status.Allocation = a
	for i := range reservations {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: fmt.Sprintf("user-%d", i), UID: types.UID(fmt.Sprintf("uid-user-%d", i)),
		})
	}
	return c
}

// Slice is a node's ResourceSlice of count devices named <prefix>-0, ...
// with the given string attributes (a complete pool of one slice).
func Slice(node, driver, prefix string, count int, attrs map[string]string) *resourcev1.ResourceSlice {
	it := v1alpha1.InstanceType{}
	ng := &v1alpha1.NodeGroup{Spec: v1alpha1.NodeGroupSpec{InstanceTypes: []v1alpha1.InstanceType{it}}}
	Devices(driver, prefix, count, attrs)(ng)
	return ng.Spec.InstanceTypes[0].ResourceSlices(node)[0]
}

// PodClaimTemplate gives the pod a claim made from a template.
func PodClaimTemplate(name, template string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(template)})
	}
}

// PodClaim gives the pod an existing (shared) claim.
func PodClaim(name, claim string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)})
	}
}

// InPodGroup puts the pod in a PodGroup (spec.schedulingGroup).
func InPodGroup(group string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
}

// PodGroup is a scheduling.k8s.io/v1alpha2 PodGroup in namespace default
// whose claims (name -> ResourceClaim name) are reserved for the group.
func PodGroup(name string, claims map[string]string) *schedulingv1alpha2.PodGroup {
	g := &schedulingv1alpha2.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-podgroup-" + name)},
		Spec: schedulingv1alpha2.PodGroupSpec{SchedulingPolicy: schedulingv1alpha2.PodGroupSchedulingPolicy{
			Basic: &schedulingv1alpha2.BasicSchedulingPolicy{},
		}},
	}
	for k, v := range claims {
		g.Spec.ResourceClaims = append(g.Spec.ResourceClaims, schedulingv1alpha2.PodGroupResourceClaim{Name: k, ResourceClaimName: ptr.To(v)})
	}
	return g
}
