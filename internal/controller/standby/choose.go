package standby

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// unitsIn is how many units of the shape fit in the resources, for the
// resource that fits the fewest; 0 for an empty shape or one that asks for
// a resource the node does not have.
func unitsIn(have corev1.ResourceList, shape corev1.ResourceList) int32 {
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

// choice is the offering standby nodes of a Headroom are launched with.
type choice struct {
	group *v1alpha1.NodeGroup
	key   v1alpha1.OfferingKey
	// perNode is how many units one node holds.
	perNode int32
	// price and stopped are its running and stopped price per hour.
	price, stopped float64
}

// choose returns the offering whose node keeps a unit running for the
// least (a resumed standby node runs at its full price), then the one
// whose suspended node costs least per unit, then by name: among the
// groups given, offerings not unavailable, whose instance type holds at
// least one unit. ok is false when none does.
func choose(groups []*v1alpha1.NodeGroup, shape corev1.ResourceList, unavailable []v1alpha1.OfferingKey) (choice, bool) {
	var best choice
	found := false
	for _, g := range groups {
		for i := range g.Spec.InstanceTypes {
			it := &g.Spec.InstanceTypes[i]
			k := unitsIn(it.Capacity, shape)
			if k < 1 {
				continue
			}
			for j := range it.Offerings {
				o := &it.Offerings[j]
				key := v1alpha1.OfferingKey{NodeGroup: g.Name, InstanceType: it.Name, Zone: o.Zone, CapacityType: string(o.CapacityType)}
				if slices.Contains(unavailable, key) {
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
				c := choice{group: g, key: key, perNode: k, price: price, stopped: stopped}
				if !found || better(c, best) {
					best, found = c, true
				}
			}
		}
	}
	return best, found
}

func better(a, b choice) bool {
	pa, pb := a.price/float64(a.perNode), b.price/float64(b.perNode)
	if pa != pb {
		return pa < pb
	}
	sa, sb := a.stopped/float64(a.perNode), b.stopped/float64(b.perNode)
	if sa != sb {
		return sa < sb
	}
	ka, kb := a.key, b.key
	return cmp.Or(cmp.Compare(ka.NodeGroup, kb.NodeGroup), cmp.Compare(ka.InstanceType, kb.InstanceType),
		cmp.Compare(ka.Zone, kb.Zone), cmp.Compare(ka.CapacityType, kb.CapacityType)) < 0
}
