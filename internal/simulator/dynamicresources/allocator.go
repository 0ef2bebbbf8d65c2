package dynamicresources

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

// features are the allocator features berth simulates: those of the
// stable allocator, which kube-scheduler 1.36 uses with default gates.
var features = structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}

// optionClass keys what the model memoises per option and class.
type optionClass[O Option] struct {
	o     O
	class int
	// mask says which of the class's claims are allocated (bit i for
	// Claims[i]); Units uses 0.
	mask uint64
}

// templateFits runs the allocator on an option's devices alone (nothing of
// the plan is allocated on a template), cached per option and class.
func (m *Model[N, O]) templateFits(o O, class int, mask uint64, claims []*resourcev1.ResourceClaim) (bool, error) {
	key := optionClass[O]{o, class, mask}
	if v, ok := m.optionCache[key]; ok {
		return v, nil
	}
	node, own := o.Devices()
	res, err := m.allocate(node, m.withShared(own), m.realAllocated(own), claims)
	if err == nil {
		m.optionCache[key] = res != nil
	}
	return res != nil, err
}

// allocateOn allocates claims on node n (as option o unless o is the zero
// O), given what the cluster and the plan hold there. nil means they do
// not fit.
func (m *Model[N, O]) allocateOn(h *Host[O], n N, o O, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	var (
		none O
		node *corev1.Node
		pool []*resourcev1.ResourceSlice
	)
	if o == none {
		node, pool = h.Node, m.slicesOf(h)
	} else {
		var own []*resourcev1.ResourceSlice
		node, own = o.Devices()
		pool = m.withShared(own)
	}
	held := m.realAllocated(pool)
	if planned := m.planned[site[N, O]{n, o}]; planned.Len() > 0 {
		held = held.Union(planned)
	}
	return m.allocate(node, pool, held, claims)
}

// withShared adds the slices of network-attached devices to a node's own.
func (m *Model[N, O]) withShared(own []*resourcev1.ResourceSlice) []*resourcev1.ResourceSlice {
	if len(m.otherSlices) == 0 {
		return own
	}
	return slices.Concat(own, m.otherSlices)
}

// slicesOf returns the ResourceSlices a node has: those it published, or
// when it has published none yet, the ones its instance type will.
func (m *Model[N, O]) slicesOf(h *Host[O]) []*resourcev1.ResourceSlice {
	own := m.nodeSlices[h.Node.Name]
	if len(own) == 0 {
		own = h.Expected
	}
	return m.withShared(own)
}

// realAllocated are the devices of the slices' pools that claims in the
// cluster hold.
func (m *Model[N, O]) realAllocated(pool []*resourcev1.ResourceSlice) sets.Set[structured.DeviceID] {
	out := sets.New[structured.DeviceID]()
	seen := map[poolKey]bool{}
	for _, sl := range pool {
		k := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		if seen[k] {
			continue
		}
		seen[k] = true
		for id := range m.allocated[k] {
			out.Insert(id)
		}
	}
	return out
}

// allocate runs the structured allocator, as kube-scheduler's Filter
// does. It returns nil when the claims do not fit the node; an error means
// they cannot be evaluated anywhere (a CEL error, a missing class).
func (m *Model[N, O]) allocate(node *corev1.Node, pool []*resourcev1.ResourceSlice, held sets.Set[structured.DeviceID],
	claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	if len(pool) == 0 || minDevices(claims) > deviceCount(pool)-held.Len() {
		return nil, nil // fewer devices left than the claims ask for
	}
	ctx := context.Background()
	a, err := structured.NewAllocator(ctx, features, structured.AllocatedState{AllocatedDevices: held}, m.classes, pool, m.celCache)
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
