package headroom

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
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

// NodeUnits is how many units of the shape a standby node holds once it
// is resumed: its allocatable less what the DaemonSets that then run on
// it request (those that do not tolerate the standby taint start after
// the resume, and take their room before the units' pods do).
func NodeUnits(n *corev1.Node, dss []daemonset.Pod, shape corev1.ResourceList) int32 {
	return UnitsIn(daemonset.Remaining(n.Status.Allocatable, dss, Resumable(n, nil)), shape)
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
// least one unit beside the DaemonSets that would run on it, that fits
// accepts (when set). ok is false when none does.
func CheapestPerUnit(groups []*v1alpha1.NodeGroup, shape corev1.ResourceList, dss []daemonset.Pod, unavailable []v1alpha1.OfferingKey,
	fits func(*v1alpha1.NodeGroup, *v1alpha1.InstanceType, *v1alpha1.Offering) bool) (UnitOffering, bool) {
	var best UnitOffering
	found := false
	for _, g := range groups {
		node := &corev1.Node{Spec: corev1.NodeSpec{Taints: g.NodeTaints()}}
		for i := range g.Spec.InstanceTypes {
			it := &g.Spec.InstanceTypes[i]
			if UnitsIn(it.Capacity, shape) < 1 {
				continue
			}
			for j := range it.Offerings {
				o := &it.Offerings[j]
				key := v1alpha1.OfferingKey{NodeGroup: g.Name, InstanceType: it.Name, Zone: o.Zone, CapacityType: string(o.CapacityType)}
				if slices.Contains(unavailable, key) || (fits != nil && !fits(g, it, o)) {
					continue
				}
				node.Labels = g.NodeLabels(it, o)
				k := UnitsIn(daemonset.Remaining(it.Capacity, dss, node), shape)
				if k < 1 {
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
// not-ready or unreachable taints, no standby label), whose allocatable
// leaves room for the pods of the DaemonSets that start on it only once
// it is resumed (those that do not tolerate the standby taint; the others
// run on it already). The same for every round, so that a model kept
// across rounds sees no change. Pods and running units then fill
// suspended nodes before new nodes are planned, and berth resumes each
// node the plan puts something on.
func Resumable(n *corev1.Node, dss []daemonset.Pod) *corev1.Node {
	c := n.DeepCopy()
	delete(c.Labels, v1alpha1.TaintStandby)
	c.Spec.Taints = slices.DeleteFunc(c.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == v1alpha1.TaintStandby || t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	})
	c.Status.Conditions = nil
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[daemonset.AnnotationRoomKept] = "true"
	if len(dss) == 0 {
		return c
	}
	// As the standby node it is (its labels and taints), without the
	// transient taints: which DaemonSets run there already.
	standby := n.DeepCopy()
	standby.Spec.Taints = slices.DeleteFunc(standby.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	})
	var later []daemonset.Pod
	for _, d := range dss {
		if d.RunsOn(c) && !d.RunsOn(standby) {
			later = append(later, d)
		}
	}
	c.Status.Allocatable = daemonset.Remaining(c.Status.Allocatable, later, c)
	return c
}
