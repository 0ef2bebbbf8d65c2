package snapshot

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// DRA is what the snapshot reads of dynamic resource allocation
// (resource.k8s.io/v1 and the scheduling.k8s.io/v1alpha2 PodGroups whose
// claims are reserved for the whole group).
type DRA struct {
	DeviceClasses  []*resourcev1.DeviceClass
	Claims         []*resourcev1.ResourceClaim
	ClaimTemplates []*resourcev1.ResourceClaimTemplate
	Slices         []*resourcev1.ResourceSlice
	PodGroups      []*schedulingv1alpha2.PodGroup
}

// draFeatures are the allocator features berth simulates: those of the
// stable allocator, which kube-scheduler 1.36 uses with default gates.
var draFeatures = structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}

// draState indexes the DRA objects and tracks where the plan puts the
// users of shared claims that are not allocated yet. Everything it
// tracks in a plan is derived from pods placed on nodes, so Fork/Revert
// of pods undoes it.
type draState struct {
	classes   map[string]*resourcev1.DeviceClass
	claims    map[types.NamespacedName]*resourcev1.ResourceClaim
	templates map[types.NamespacedName]*resourcev1.ResourceClaimTemplate
	podGroups map[types.NamespacedName]*schedulingv1alpha2.PodGroup
	// nodeSlices are the slices local to one node, by node name;
	// otherSlices those of network-attached devices (node selector, all
	// nodes, per-device node selection), offered to every node.
	nodeSlices  map[string][]*resourcev1.ResourceSlice
	otherSlices []*resourcev1.ResourceSlice
	// allocated are the devices held by allocated claims (admin-access
	// results excluded, as in kube-scheduler), by pool.
	allocated map[poolKey]sets.Set[structured.DeviceID]
	// planned are the devices the plan allocates, per node and option.
	planned  map[devKey]sets.Set[structured.DeviceID]
	celCache *cel.Cache
	// gen changes whenever a pod is placed or removed or a node added;
	// check caches the last CheckDevices computation (for AddPod after the
	// filter) while gen is unchanged.
	gen   int
	check *deviceCheck
	// optionChecks cache OptionHasDevices answers while gen is
	// optionChecksGen.
	optionChecks    map[optionCheck]bool
	optionChecksGen int
	// uses tracks, per shared claim that the plan allocates, the node its
	// users are placed on and how many there are.
	uses map[ClaimKey]*claimUse
	// optionCache memoises whether a class's claims fit an option's
	// devices alone (no other pod's claims involved).
	optionCache map[optionClass]bool
	// unitCache memoises DeviceUnits.
	unitCache map[optionClass]float64
}

type claimUse struct {
	node *Node
	pods int
	// devices the claim was allocated, per option of a planned node (nil
	// key for other nodes); nil for claims allocated in the cluster.
	devices map[*Option][]structured.DeviceID
}

// devKey is where the plan allocates devices: a node, and for a planned
// node whose instance type is not chosen yet, one of its options.
type devKey struct {
	n *Node
	o *Option
}

// podDevices is what a pod's placement allocated, per option (nil key on
// nodes without options): devices of its own claims, and of the shared
// claims it allocated first.
type podDevices struct {
	perPod map[*Option][]structured.DeviceID
	shared map[ClaimKey]map[*Option][]structured.DeviceID
}

type poolKey struct{ driver, pool string }

// ClaimKey identifies a shared claim: an existing ResourceClaim, or the
// claim a PodGroup will get from its template (PodGroup set).
type ClaimKey struct {
	Namespace string
	Name      string
	// PodGroup is set for a group claim that is not created yet; Name is
	// then the claim's name within the group.
	PodGroup string
}

func (k ClaimKey) String() string {
	if k.PodGroup != "" {
		return fmt.Sprintf("%s/%s (claim %s of podgroup %s)", k.Namespace, k.PodGroup, k.Name, k.PodGroup)
	}
	return k.Namespace + "/" + k.Name
}

func newDRAState(in DRA) *draState {
	d := &draState{
		classes:     map[string]*resourcev1.DeviceClass{},
		claims:      map[types.NamespacedName]*resourcev1.ResourceClaim{},
		templates:   map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{},
		podGroups:   map[types.NamespacedName]*schedulingv1alpha2.PodGroup{},
		nodeSlices:  map[string][]*resourcev1.ResourceSlice{},
		allocated:   map[poolKey]sets.Set[structured.DeviceID]{},
		planned:     map[devKey]sets.Set[structured.DeviceID]{},
		celCache:    cel.NewCache(1000, cel.Features{EnableConsumableCapacity: false}),
		uses:        map[ClaimKey]*claimUse{},
		optionCache: map[optionClass]bool{},
		unitCache:   map[optionClass]float64{},
	}
	for _, c := range in.DeviceClasses {
		d.classes[c.Name] = c
	}
	for _, c := range in.Claims {
		d.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			k := poolKey{r.Driver, r.Pool}
			if d.allocated[k] == nil {
				d.allocated[k] = sets.New[structured.DeviceID]()
			}
			d.allocated[k].Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	for _, t := range in.ClaimTemplates {
		d.templates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
	}
	for _, g := range in.PodGroups {
		d.podGroups[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = g
	}
	for _, sl := range in.Slices {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			d.nodeSlices[*sl.Spec.NodeName] = append(d.nodeSlices[*sl.Spec.NodeName], sl)
		} else {
			d.otherSlices = append(d.otherSlices, sl)
		}
	}
	return d
}

// List and Get make draState the allocator's DeviceClassLister.
func (d *draState) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(d.classes))
	for _, c := range d.classes {
		out = append(out, c)
	}
	return out, nil
}

// Get returns a DeviceClass by name.
func (d *draState) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := d.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// podGroup returns the PodGroup a pod belongs to, or nil.
func (d *draState) podGroup(pod *corev1.Pod) (*schedulingv1alpha2.PodGroup, string) {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil, ""
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	return d.podGroups[types.NamespacedName{Namespace: pod.Namespace, Name: name}], name
}

// track counts a placed (or removed, sign -1) pod's uses of shared claims
// (where the plan allocates a claim that is not allocated yet, and how many
// reservations the plan adds) and holds the devices the pod's placement
// allocated. Called from place and unplace, so that the journal's pod
// changes undo it.
func (d *draState) track(p *Pod, n *Node, sign int) {
	rec := p.devices
	if rec != nil {
		for o, ids := range rec.perPod {
			d.hold(n, o, ids, sign)
		}
	}
	for i := range p.Class.Claims {
		pc := &p.Class.Claims[i]
		// Per-pod claims are nobody else's; a pod already among a
		// claim's reservations (a bound pod) is counted by reservedFor.
		if pc.PerPod || pc.Reserved {
			continue
		}
		u := d.uses[pc.Key]
		if sign > 0 {
			if u == nil {
				u = &claimUse{node: n}
				if rec != nil {
					u.devices = rec.shared[pc.Key]
				}
				for o, ids := range u.devices {
					d.hold(n, o, ids, 1)
				}
				d.uses[pc.Key] = u
			}
			u.pods++
			continue
		}
		u.pods--
		if u.pods == 0 {
			// The last user leaves: release the claim's devices, and
			// remember them with the pod, which takes them back if a
			// Revert places it again.
			for o, ids := range u.devices {
				d.hold(n, o, ids, -1)
			}
			if u.devices != nil {
				if p.devices == nil {
					p.devices = &podDevices{}
				}
				if p.devices.shared == nil {
					p.devices.shared = map[ClaimKey]map[*Option][]structured.DeviceID{}
				}
				p.devices.shared[pc.Key] = u.devices
			}
			delete(d.uses, pc.Key)
		}
	}
}

// hold adds (sign 1) or releases (-1) devices the plan allocated on node
// n, as option o for a planned node whose instance type is open.
func (d *draState) hold(n *Node, o *Option, ids []structured.DeviceID, sign int) {
	k := devKey{n, o}
	set := d.planned[k]
	if set == nil {
		set = sets.New[structured.DeviceID]()
		d.planned[k] = set
	}
	for _, id := range ids {
		if sign > 0 {
			set.Insert(id)
		} else {
			set.Delete(id)
		}
	}
}

// ClaimNode returns the node the plan allocates a shared claim on, nil when
// no placed pod uses it yet.
func (s *Snapshot) ClaimNode(k ClaimKey) *Node {
	if u := s.dra.uses[k]; u != nil {
		return u.node
	}
	return nil
}

// ClaimUsers returns how many placed pods of the plan use a shared claim.
func (s *Snapshot) ClaimUsers(k ClaimKey) int {
	if u := s.dra.uses[k]; u != nil {
		return u.pods
	}
	return 0
}

// HeldForWorkload says which claim reserved for a live PodGroup is
// allocated on devices of node n ("" when none): scale-down keeps such a
// node, since the group's pods come and go but its claim stays
// allocated until the group is gone (KEP-5729). O(workload claims).
func (s *Snapshot) HeldForWorkload(n *Node) string {
	for _, c := range s.dra.claims {
		a := c.Status.Allocation
		if a == nil || a.NodeSelector == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.APIGroup != schedulingv1alpha2.GroupName || r.Resource != "podgroups" {
				continue
			}
			g := s.dra.podGroups[types.NamespacedName{Namespace: c.Namespace, Name: r.Name}]
			if g == nil || g.UID != r.UID || g.DeletionTimestamp != nil {
				continue
			}
			sel, err := nodeaffinity.NewNodeSelector(a.NodeSelector)
			if err == nil && sel.Match(n.Node) {
				return fmt.Sprintf("node %s holds devices of resourceclaim %s/%s, reserved for podgroup %s", n.Name, c.Namespace, c.Name, g.Name)
			}
		}
	}
	return ""
}

// DeviceClass returns a DeviceClass by name, or nil.
func (s *Snapshot) DeviceClass(name string) *resourcev1.DeviceClass { return s.dra.classes[name] }
