package dynamicresources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// features are the allocator features berth simulates: admin access,
// prioritized lists, partitionable devices and device taints. kube-scheduler
// 1.36's default gates also turn on consumable capacity (devices that
// allow multiple allocations) and binding conditions, which berth does not
// simulate (docs/limitations.md).
var features = structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}

// optionClaims keys what the model memoises per option and the claims a
// pod allocates (an interned claimsKey).
type optionClaims[O Option] struct {
	o      O
	claims int
}

// templateFits runs the allocator on an option's devices alone (nothing of
// the plan is allocated on a template), cached per option and claims.
func (m *Model[N, O]) templateFits(o O, claims int, list []*resourcev1.ResourceClaim) (bool, error) {
	key := optionClaims[O]{o, claims}
	if v, ok := m.optionCache[key]; ok {
		return v, nil
	}
	node, own := o.Devices()
	pool := m.withShared(own) // a network-attached device the cluster holds is not free either
	res, err := m.allocate(node, pool, m.realAllocated(pool), list)
	if err == nil {
		m.optionCache[key] = res != nil
	}
	return res != nil, err
}

// allocation keys a memoised allocator run on a planned node launched as
// an option: the option (its node object and slices), the claims
// (claimsKey) and the devices the plan holds there (heldKey). The cluster's
// allocations on the option's pools do not change while the model lives.
type allocation[O Option] struct {
	optionClaims[O]
	held int
}

// allocateOn allocates claims on node n (as option o unless o is the zero
// O), given what the cluster and the plan hold there. nil means they do
// not fit. On an option, the answer is memoised by what it depends on, so
// planned nodes of one option holding the same devices share one run.
func (m *Model[N, O]) allocateOn(h *Host[O], n N, o O, claims int, list []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	var none O
	at := site[N, O]{n, o}
	planned := m.planned[at]
	held := func(pool []*resourcev1.ResourceSlice) sets.Set[structured.DeviceID] {
		out := m.realAllocated(pool)
		for id := range planned {
			out.Insert(id)
		}
		return out
	}
	if o == none {
		pool := m.slicesOf(h)
		return m.allocate(h.Node, pool, held(pool), list)
	}
	key := allocation[O]{optionClaims[O]{o, claims}, m.heldKey(at, planned)}
	if res, ok := m.allocCache[key]; ok {
		return res, nil
	}
	node, own := o.Devices()
	pool := m.withShared(own)
	res, err := m.allocate(node, pool, held(pool), list)
	if err == nil {
		m.allocCache[key] = res
	}
	return res, err
}

// heldKey interns which devices the plan holds at a site, independent of
// the set's order: equal sets get equal keys. O(d log d) for d devices
// the first time after hold changes the set, O(1) after.
func (m *Model[N, O]) heldKey(at site[N, O], held sets.Set[structured.DeviceID]) int {
	if id, ok := m.heldKeys[at]; ok {
		return id
	}
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id.String())
	}
	slices.Sort(ids)
	s := strings.Join(ids, "\x00")
	id, ok := m.heldSets[s]
	if !ok {
		id = len(m.heldSets)
		m.heldSets[s] = id
	}
	m.heldKeys[at] = id
	return id
}

// claimsKey interns what the allocator reads of lists of claims (their
// namespaces and specs), so that classes whose pods ask for the same
// devices (pods of one claim template with other cpu requests, pods
// sharing other claims with equal specs) share memoised allocations. It
// is computed once per class, mask of claims and use.
func (m *Model[N, O]) claimsKey(k classClaims, lists ...[]*resourcev1.ResourceClaim) int {
	if id, ok := m.classClaims[k]; ok {
		return id
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%t", k.units)
	for _, list := range lists {
		sb.WriteString("\x01")
		for _, c := range list {
			spec, err := json.Marshal(&c.Spec)
			if err != nil { // cannot happen for API types; never share then
				spec = []byte(fmt.Sprintf("%p", c))
			}
			sb.WriteString(c.Namespace)
			sb.WriteByte(0)
			sb.Write(spec)
			sb.WriteByte(0)
		}
	}
	id, ok := m.claimSpecs[sb.String()]
	if !ok {
		id = len(m.claimSpecs)
		m.claimSpecs[sb.String()] = id
	}
	m.classClaims[k] = id
	return id
}

// classClaims says which claims of a class a claimsKey is of: those of
// mask (bit i for Claims[i]), or for units, the class's shared claims then
// its own.
type classClaims struct {
	class int
	mask  uint64
	units bool
}

// withShared adds the slices of network-attached devices to a node's own.
func (m *Model[N, O]) withShared(own []*resourcev1.ResourceSlice) []*resourcev1.ResourceSlice {
	if len(m.otherSlices) == 0 {
		return own
	}
	return slices.Concat(own, m.otherSlices)
}

// slicesOf returns the ResourceSlices a node has: those it published, and
// of each driver it has published none of yet, the ones its instance type
// will (Host.Expected: a booting node's).
func (m *Model[N, O]) slicesOf(h *Host[O]) []*resourcev1.ResourceSlice {
	return m.withShared(withExpected(m.nodeSlices[h.Node.Name], h.Expected))
}

// withExpected adds to the slices a node published the expected slices of
// the drivers it has published none of.
func withExpected(own, expected []*resourcev1.ResourceSlice) []*resourcev1.ResourceSlice {
	if len(own) == 0 {
		return expected
	}
	if len(expected) == 0 {
		return own
	}
	published := map[string]bool{}
	for _, sl := range own {
		published[sl.Spec.Driver] = true
	}
	var missing []*resourcev1.ResourceSlice
	for _, sl := range expected {
		if !published[sl.Spec.Driver] {
			missing = append(missing, sl)
		}
	}
	if len(missing) == 0 {
		return own
	}
	return slices.Concat(own, missing)
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

// allocateTimeout bounds one run of the structured allocator, as
// kube-scheduler bounds its DRA Filter (DRASchedulerFilterTimeout, 10 s
// there): claims whose constraints no set of a node's devices meets make
// it try every combination of them, exponential in their number (16
// devices took longer than 16 minutes). A run that times out is read as
// kube-scheduler reads it: the claims do not fit the node. Runs that
// fit take microseconds to milliseconds.
const allocateTimeout = time.Second

// allocateBudget bounds the time runs that timed out may take over one
// model (a round): past it, each run gets allocateFloor only, so that a
// pathological claim tried on many nodes and options costs a round
// seconds, not minutes, and ordinary claims still allocate.
const (
	allocateBudget = 5 * time.Second
	allocateFloor  = 20 * time.Millisecond
)

// runTimeout is the time the next run of the allocator may take.
func (m *Model[N, O]) runTimeout() time.Duration {
	if m.slowSpent >= allocateBudget {
		return allocateFloor
	}
	return allocateTimeout
}

// allocate runs the structured allocator, as kube-scheduler's Filter
// does. It returns nil when the claims do not fit the node; an error means
// they cannot be evaluated anywhere (a CEL error, a missing class).
func (m *Model[N, O]) allocate(node *corev1.Node, pool []*resourcev1.ResourceSlice, held sets.Set[structured.DeviceID],
	claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	if len(pool) == 0 || minDevices(claims) > deviceCount(pool)-held.Len() {
		return nil, nil // fewer devices left than the claims ask for
	}
	if err := m.hugeNumber(claims); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.runTimeout())
	defer cancel()
	a, err := structured.NewAllocator(ctx, features, structured.AllocatedState{AllocatedDevices: held}, m.classes, pool, m.celCache)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := a.Allocate(ctx, node, claims)
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		m.slowSpent += time.Since(start)
		m.TimedOut++
		return nil, nil // as kube-scheduler reads its Filter's timeout: the claims do not fit here
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
