package snapshot

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

func (s *Snapshot) optionSlices(o *Option) []*resourcev1.ResourceSlice {
	if len(s.dra.otherSlices) == 0 {
		return o.Slices
	}
	return slices.Concat(o.Slices, s.dra.otherSlices)
}

// realAllocated are the devices of the slices' pools that claims in the
// cluster hold.
func (s *Snapshot) realAllocated(pool []*resourcev1.ResourceSlice) sets.Set[structured.DeviceID] {
	out := sets.New[structured.DeviceID]()
	seen := map[poolKey]bool{}
	for _, sl := range pool {
		k := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		if seen[k] {
			continue
		}
		seen[k] = true
		for id := range s.dra.allocated[k] {
			out.Insert(id)
		}
	}
	return out
}

// slicesOf returns the ResourceSlices a node has: those it published, or
// when it has published none yet, the ones its instance type will.
func (s *Snapshot) slicesOf(n *Node) []*resourcev1.ResourceSlice {
	own := s.dra.nodeSlices[n.Name]
	if len(own) == 0 {
		own = n.ExpectedSlices
	}
	if len(s.dra.otherSlices) == 0 {
		return own
	}
	return slices.Concat(own, s.dra.otherSlices)
}

// runAllocator runs the structured allocator, as kube-scheduler's Filter
// does. It returns nil when the claims do not fit the node; an error means
// they cannot be evaluated anywhere (a CEL error, a missing class).
func (s *Snapshot) runAllocator(node *corev1.Node, pool []*resourcev1.ResourceSlice, held sets.Set[structured.DeviceID],
	claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	if len(pool) == 0 || minDevices(claims) > deviceCount(pool)-held.Len() {
		return nil, nil // fewer devices left than the claims ask for
	}
	ctx := context.Background()
	a, err := structured.NewAllocator(ctx, draFeatures, structured.AllocatedState{AllocatedDevices: held}, s.dra, pool, s.dra.celCache)
	if err != nil {
		return nil, err
	}
	res, err := a.Allocate(ctx, node, claims)
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, nil
	case err != nil:
		return nil, err
	case len(res) != len(claims):
		return nil, nil
	}
	return res, nil
}

// deviceIDs are the devices an allocation takes (admin-access results do
// not take a device, as in kube-scheduler).
func deviceIDs(a *resourcev1.AllocationResult) []structured.DeviceID {
	out := make([]structured.DeviceID, 0, len(a.Devices.Results))
	for _, r := range a.Devices.Results {
		if !ptr.Deref(r.AdminAccess, false) {
			out = append(out, structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	return out
}
