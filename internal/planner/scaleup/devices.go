package scaleup

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// deviceTypes indexes, by group and instance type name, the instance
// types that carry devices (DRA ResourceSlices) or extended resources
// (device plugin resources such as nvidia.com/gpu): most groups have
// none, and a node's lookup is then one map read instead of a walk over
// the group's types.
type deviceTypes map[string]map[string]deviceType

// deviceType is an indexed instance type and its extended resources (nil
// when it has none).
type deviceType struct {
	it       *v1alpha1.InstanceType
	extended corev1.ResourceList
}

func newDeviceTypes(groups []*v1alpha1.NodeGroup) deviceTypes {
	out := deviceTypes{}
	for _, g := range groups {
		for i := range g.Spec.InstanceTypes {
			it := &g.Spec.InstanceTypes[i]
			ext := it.ExtendedResources()
			if len(it.Devices) == 0 && ext == nil {
				continue
			}
			if out[g.Name] == nil {
				out[g.Name] = map[string]deviceType{}
			}
			if _, dup := out[g.Name][it.Name]; !dup {
				out[g.Name][it.Name] = deviceType{it: it, extended: ext} // the first of a name, as the group's order says
			}
		}
	}
	return out
}

// expectedSlices are the ResourceSlices a node of a group publishes once
// its DRA drivers run: those of its instance type. A node that is still
// booting may not have published them yet; planning with them keeps berth
// from launching a second node for pods the first one will take. Past its
// boot a node has what it published (the caller asks only for booting
// nodes): a driver that never published is no device to plan on.
func (d deviceTypes) expectedSlices(n *corev1.Node, group string) []*resourcev1.ResourceSlice {
	t, ok := d[group][n.Labels[v1alpha1.LabelInstanceType]]
	if !ok || len(t.it.Devices) == 0 {
		return nil
	}
	return t.it.ResourceSlices(n.Name)
}

// expected is n as it will be once its device plugins have registered:
// a node still booting advertises its extended resources only then (and
// a kubelet restart zeroes them for a moment), so it is planned with its
// instance type's. n itself when it advertises them all, or is no
// booting node of a group whose type has any.
func (d deviceTypes) expected(n *corev1.Node, group string, booting bool) *corev1.Node {
	ext := d[group][n.Labels[v1alpha1.LabelInstanceType]].extended
	if ext == nil || !booting {
		return n
	}
	var alloc corev1.ResourceList
	for name, q := range ext {
		if have, ok := n.Status.Allocatable[name]; ok && have.Sign() > 0 {
			continue
		}
		if alloc == nil {
			alloc = maps.Clone(n.Status.Allocatable)
			if alloc == nil {
				alloc = corev1.ResourceList{}
			}
		}
		alloc[name] = q
	}
	if alloc == nil {
		return n
	}
	c := *n
	c.Status.Allocatable = alloc
	return &c
}
