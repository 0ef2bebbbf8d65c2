package fidelity

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// DRACase is a cluster with devices and one pod with resource claims.
type DRACase struct {
	Nodes   []*corev1.Node
	Classes []*resourcev1.DeviceClass
	Slices  []*resourcev1.ResourceSlice
	// Claims are the cluster's claims: allocated ones of other pods, and
	// the incoming pod's (its own, made from a template, and shared ones).
	Claims []*resourcev1.ResourceClaim
	Pod    *corev1.Pod
}

const (
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
)

// GenerateDRA makes a DRA case from a seed: nodes with slices of two
// drivers (devices with model, memory and numa attributes), device classes
// with CEL selectors, claims of other pods allocated on some devices (some
// with admin access), and an incoming pod whose claims ask for counts, all
// devices of a class, matching attributes, admin access, or share a claim
// another pod already holds.
func GenerateDRA(seed int64) DRACase {
	g := gen{r: rand.New(rand.NewSource(seed))}
	c := DRACase{Classes: []*resourcev1.DeviceClass{
		deviceClass("gpu", fmt.Sprintf("device.driver == %q", gpuDriver)),
		deviceClass("nic", fmt.Sprintf("device.driver == %q", nicDriver)),
		deviceClass("big-gpu", fmt.Sprintf(`device.driver == %q && device.attributes[%q].memory >= 40`, gpuDriver, gpuDriver)),
	}}
	type dev struct{ node, driver, name string }
	var devs []dev
	for i := range 2 + g.r.Intn(4) {
		name := fmt.Sprintf("node-%d", i)
		c.Nodes = append(c.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostKey: name}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: g.qty("110")}}})
		for _, driver := range []string{gpuDriver, nicDriver} {
			if g.chance(0.25) {
				continue
			}
			sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + driver},
				Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(name),
					Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
			for d := range 1 + g.r.Intn(6) {
				dn := fmt.Sprintf("dev-%d", d)
				sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: dn, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"model":  {StringValue: ptr.To(g.pick("a100", "t4", "h100"))},
					"memory": {IntValue: ptr.To(int64([]int{16, 40, 80}[g.r.Intn(3)]))},
					"numa":   {IntValue: ptr.To(int64(g.r.Intn(2)))},
				}})
				devs = append(devs, dev{name, driver, dn})
			}
			c.Slices = append(c.Slices, sl)
		}
	}
	// Other pods' claims, allocated on random devices.
	for i := range g.r.Intn(len(devs) + 1) {
		d := devs[g.r.Intn(len(devs))]
		cl := claim(fmt.Sprintf("other-%d", i), g.request("r", false))
		cl.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "r", Driver: d.driver, Pool: d.node, Device: d.name, AdminAccess: adminAccess(g.chance(0.15)),
			}}},
			NodeSelector: nodeSelector(d.node),
		}
		cl.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: types.UID(fmt.Sprintf("uid-other-%d", i))}}
		c.Claims = append(c.Claims, cl)
	}
	c.Pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "incoming", Namespace: "default", UID: "uid-incoming"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	for i := range 1 + g.r.Intn(2) {
		name := fmt.Sprintf("c%d", i)
		switch {
		case len(c.Claims) > 0 && g.chance(0.2):
			// Share a claim another pod holds: pinned to its node.
			shared := c.Claims[g.r.Intn(len(c.Claims))]
			c.Pod.Spec.ResourceClaims = append(c.Pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(shared.Name)})
		case g.chance(0.2):
			// A shared claim nobody holds yet.
			cl := claim("shared-"+name, g.deviceRequests()...)
			c.Claims = append(c.Claims, cl)
			c.Pod.Spec.ResourceClaims = append(c.Pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(cl.Name)})
		default:
			// The pod's own claim, made from a template by the controller.
			cl := claim("incoming-"+name, g.deviceRequests()...)
			cl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "incoming", UID: "uid-incoming", Controller: ptr.To(true)}}
			c.Claims = append(c.Claims, cl)
			c.Pod.Spec.ResourceClaims = append(c.Pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To("tmpl")})
			c.Pod.Status.ResourceClaimStatuses = append(c.Pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: name, ResourceClaimName: ptr.To(cl.Name)})
		}
	}
	return c
}

// requests are one or two device requests, sometimes constrained to
// devices with equal numa.
func (g gen) deviceRequests() []resourcev1.DeviceRequest {
	rs := []resourcev1.DeviceRequest{g.request("a", true)}
	if g.chance(0.3) {
		rs = append(rs, g.request("b", true))
	}
	return rs
}

func (g gen) request(name string, varied bool) resourcev1.DeviceRequest {
	e := &resourcev1.ExactDeviceRequest{DeviceClassName: g.pick("gpu", "nic", "big-gpu"), AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}
	if varied {
		e.Count = int64(1 + g.r.Intn(2))
		if g.chance(0.1) {
			e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
		}
		if g.chance(0.4) {
			driver := gpuDriver
			if e.DeviceClassName == "nic" {
				driver = nicDriver
			}
			e.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: g.pick(
				fmt.Sprintf(`device.attributes[%q].model == "a100"`, driver),
				fmt.Sprintf(`device.attributes[%q].memory > 16`, driver),
				fmt.Sprintf(`device.attributes[%q].numa == 0`, driver),
			)}}}
		}
		if g.chance(0.1) {
			e.AdminAccess = ptr.To(true)
		}
	}
	return resourcev1.DeviceRequest{Name: name, Exactly: e}
}

func claim(name string, requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	cl := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}}
	if len(requests) > 1 {
		// Both requests must be on devices with equal numa.
		cl.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(gpuDriver + "/numa"))}}
	}
	return cl
}

func deviceClass(name, expr string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
}

func adminAccess(b bool) *bool {
	if b {
		return ptr.To(true)
	}
	return nil
}

func nodeSelector(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
}
