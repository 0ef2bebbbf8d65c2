package headroom

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// UnitsIn is how many units of the shape fit in the resources, for the
// resource that fits the fewest; 0 for an empty shape or one that asks for
// a resource the node does not have.
func UnitsIn(have corev1.ResourceList, shape corev1.ResourceList) int32 {
	n := int64(math.MaxInt32)
	asked := false
	for name, want := range shape {
		if want.IsZero() {
			continue
		}
		asked = true
		got, ok := have[name]
		if !ok {
			return 0
		}
		n = min(n, quotient(got, want))
	}
	if !asked {
		return 0
	}
	return int32(n)
}

// quotient is floor(a / b) for positive quantities, in milli-units for
// small values (cpu) and units for large ones (bytes), without overflow.
func quotient(a, b resource.Quantity) int64 {
	if a.Value() < math.MaxInt64/1000 && b.Value() < math.MaxInt64/1000 {
		bm := b.MilliValue()
		if bm <= 0 {
			return 0
		}
		return min(a.MilliValue()/bm, math.MaxInt32)
	}
	if b.Value() <= 0 {
		return 0
	}
	return min(a.Value()/b.Value(), math.MaxInt32)
}

// UnitOffering is an offering with how many units of a shape its node
// holds and what a node costs running and stopped.
type UnitOffering struct {
	Group *v1alpha1.NodeGroup
	Key   v1alpha1.OfferingKey
	// PerNode is how many units one node holds.
	PerNode int32
	// Price and Stopped are its running and stopped price per hour.
	Price, Stopped float64
}

// CheapestPerUnit returns the offering whose node keeps a unit running for
// the least (the price a unit of headroom costs; a resumed standby node
// runs at its full price too), then the one
// whose suspended node costs least per unit, then by name: among the
// groups given, offerings not unavailable, whose instance type holds at
// least one unit, that fits accepts (when set). ok is false when none
// does.
func CheapestPerUnit(groups []*v1alpha1.NodeGroup, shape corev1.ResourceList, unavailable []v1alpha1.OfferingKey,
	fits func(*v1alpha1.NodeGroup, *v1alpha1.InstanceType, *v1alpha1.Offering) bool) (UnitOffering, bool) {
	var best UnitOffering
	found := false
	for _, g := range groups {
		for i := range g.Spec.InstanceTypes {
			it := &g.Spec.InstanceTypes[i]
			k := UnitsIn(it.Capacity, shape)
			if k < 1 {
				continue
			}
			for j := range it.Offerings {
				o := &it.Offerings[j]
				key := v1alpha1.OfferingKey{NodeGroup: g.Name, InstanceType: it.Name, Zone: o.Zone, CapacityType: string(o.CapacityType)}
				if slices.Contains(unavailable, key) || (fits != nil && !fits(g, it, o)) {
					continue
				}
				price, err := o.Price()
				if err != nil {
					continue
				}
				stopped, err := o.StoppedPrice()
				if err != nil {
					continue
				}
				c := UnitOffering{Group: g, Key: key, PerNode: k, Price: price, Stopped: stopped}
				if !found || cheaperPerUnit(c, best) {
					best, found = c, true
				}
			}
		}
	}
	return best, found
}

func cheaperPerUnit(a, b UnitOffering) bool {
	pa, pb := a.Price/float64(a.PerNode), b.Price/float64(b.PerNode)
	if pa != pb {
		return pa < pb
	}
	sa, sb := a.Stopped/float64(a.PerNode), b.Stopped/float64(b.PerNode)
	if sa != sb {
		return sa < sb
	}
	ka, kb := a.Key, b.Key
	return cmp.Or(cmp.Compare(ka.NodeGroup, kb.NodeGroup), cmp.Compare(ka.InstanceType, kb.InstanceType),
		cmp.Compare(ka.Zone, kb.Zone), cmp.Compare(ka.CapacityType, kb.CapacityType)) < 0
}

// Resumable is a suspended standby node as the planner should see it when
// it may be resumed for what it plans: a node that boots, as a launched
// one the cache has not shown yet (no conditions, none of the standby,
// not-ready or unreachable taints, no standby label). The same for every
// round, so that a model kept across rounds sees no change. Pods and
// running units then fill suspended nodes before new nodes are planned,
// and berth resumes each node the plan puts something on.
func Resumable(n *corev1.Node) *corev1.Node {
	c := n.DeepCopy()
	delete(c.Labels, v1alpha1.TaintStandby)
	c.Spec.Taints = slices.DeleteFunc(c.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == v1alpha1.TaintStandby || t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	})
	c.Status.Conditions = nil
	return c
}
