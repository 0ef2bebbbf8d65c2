package scaleup

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// deviceTypes indexes, by group and instance type name, the instance
// types that carry devices: most groups have none, and a node's lookup
// is then one map read instead of a walk over the group's types.
type deviceTypes map[string]map[string]*v1alpha1.InstanceType

func newDeviceTypes(groups []*v1alpha1.NodeGroup) deviceTypes {
	out := deviceTypes{}
	for _, g := range groups {
		for i := range g.Spec.InstanceTypes {
			it := &g.Spec.InstanceTypes[i]
			if len(it.Devices) == 0 {
				continue
			}
			if out[g.Name] == nil {
				out[g.Name] = map[string]*v1alpha1.InstanceType{}
			}
			if _, dup := out[g.Name][it.Name]; !dup {
				out[g.Name][it.Name] = it // the first of a name, as the group's order says
			}
		}
	}
	return out
}

// expectedSlices are the ResourceSlices a node of a group publishes once
// its DRA drivers run: those of its instance type. A node that is still
// booting has published none yet; planning with them keeps berth from
// launching a second node for pods the first one will take.
func (d deviceTypes) expectedSlices(n *corev1.Node, group string) []*resourcev1.ResourceSlice {
	types := d[group]
	if types == nil {
		return nil
	}
	if it := types[n.Labels[v1alpha1.LabelInstanceType]]; it != nil {
		return it.ResourceSlices(n.Name)
	}
	return nil
}
