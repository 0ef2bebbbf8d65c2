// Package dynamicresources is the simulator's model of dynamic resource
// allocation (DRA: resource.k8s.io/v1, and the scheduling.k8s.io/v1alpha2
// PodGroups whose claims are reserved for the whole group), kept apart
// from the cluster snapshot as Cluster Autoscaler keeps its
// simulator/dynamicresources. It gathers a pod's ResourceClaims as
// kube-scheduler's DynamicResources PreFilter does, asks the structured
// allocator (k8s.io/dynamic-resource-allocation/structured) whether they
// fit a node's devices, and holds the devices the plan allocates, per node
// and option.
//
// The snapshot owns nodes, options and pods; the model knows a node only
// as a key N and an option as an O, and asks the snapshot about a node
// (Nodes) when an answer is not cached. The snapshot's journal undoes the
// model through three calls: Place when a pod is placed, Unplace when it
// is taken off (Revert replays them in reverse), and Changed whenever a
// node or pod changes, which drops the answers cached since.
//
// Files, in reading order:
//   - model.go: Objects (the input), Model and New; what the model says
//     of the cluster alone (HeldForWorkload, DeviceClass).
//   - claims.go: PodClaim, ClaimKey and Request; Resolve, the PreFilter.
//   - ledger.go: Placement and the devices the plan holds per node and
//     option; Place, Unplace, ClaimNode, ClaimUsers.
//   - check.go: Verdict, Nodes and Answer; Check and OptionFits, the
//     Filter: can a class's claims be allocated on a node, per option.
//   - allocator.go: the structured allocator and the devices of nodes and
//     options (their own slices plus network-attached ones).
//   - units.go: Units, how many pods an option's devices hold; messages.
//
// The package is pure: no clients.
package dynamicresources

import (
	"fmt"
	"time"

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

// Objects are the DRA objects the model reads: device classes, claims and
// their templates, published slices, PodGroups.
type Objects struct {
	DeviceClasses  []*resourcev1.DeviceClass
	Claims         []*resourcev1.ResourceClaim
	ClaimTemplates []*resourcev1.ResourceClaimTemplate
	Slices         []*resourcev1.ResourceSlice
	PodGroups      []*schedulingv1alpha2.PodGroup
}

// Model indexes the DRA objects and tracks the devices the plan allocates
// on the snapshot's nodes. N identifies a node, O an option of a planned
// node whose instance type is not chosen yet (the zero O: no option).
// Everything it tracks in a plan is derived from pods placed on nodes, so
// undoing the pods (Unplace, Place) undoes it.
type Model[N comparable, O Option] struct {
	classes   classLister
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
	celCache  *cel.Cache
	// quantityVerdicts keeps what quantityArgs found per CEL expression.
	quantityVerdicts map[string]error
	// nodes answers what the model asks about the snapshot's nodes;
	// fitting is the buffer its Fitting answers go to.
	nodes   Nodes[N, O]
	fitting []O

	// planned are the devices the plan allocates, per node and option.
	planned map[site[N, O]]sets.Set[structured.DeviceID]
	// heldKeys are the interned keys of planned sets (heldKey), until
	// hold changes one; heldSets intern them.
	heldKeys map[site[N, O]]int
	heldSets map[string]int
	// slowSpent is the time runs of the allocator that timed out took
	// (allocateBudget); TimedOut counts them.
	slowSpent time.Duration
	TimedOut  int
	// uses tracks, per shared claim that the plan allocates, the node its
	// users are placed on and how many there are.
	uses map[ClaimKey]*claimUse[N, O]

	// gen changes with every Changed; check caches the last Check (for
	// AddPod after the filter) while gen is unchanged.
	gen   int
	check *Answer[N, O]
	// optionChecks cache OptionFits answers while gen is optionChecksGen.
	optionChecks    map[optionCheck[N, O]]bool
	optionChecksGen int
	// optionCache memoises whether a class's claims fit an option's
	// devices alone (no other pod's claims involved); unitCache memoises
	// Units. Neither depends on the plan.
	optionCache map[optionClaims[O]]bool
	unitCache   map[optionClaims[O]]float64
	// allocCache memoises allocator runs on planned nodes by option,
	// claims and the devices the plan holds there (allocateOn); nil
	// results (the claims do not fit) included.
	allocCache map[allocation[O]][]resourcev1.AllocationResult
	// classClaims and claimSpecs intern what classes' claims ask for
	// (claimsKey).
	classClaims map[classClaims]int
	claimSpecs  map[string]int
}

type poolKey struct{ driver, pool string }

// New indexes the objects. nodes answers what the model asks about the
// snapshot's nodes when it checks a class on one.
func New[N comparable, O Option](in Objects, nodes Nodes[N, O]) *Model[N, O] {
	m := &Model[N, O]{
		classes:          classLister{},
		claims:           map[types.NamespacedName]*resourcev1.ResourceClaim{},
		templates:        map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{},
		podGroups:        map[types.NamespacedName]*schedulingv1alpha2.PodGroup{},
		nodeSlices:       map[string][]*resourcev1.ResourceSlice{},
		allocated:        map[poolKey]sets.Set[structured.DeviceID]{},
		celCache:         cel.NewCache(1000, cel.Features{EnableConsumableCapacity: false}),
		quantityVerdicts: map[string]error{},
		nodes:            nodes,
		planned:          map[site[N, O]]sets.Set[structured.DeviceID]{},
		heldKeys:         map[site[N, O]]int{},
		heldSets:         map[string]int{},
		uses:             map[ClaimKey]*claimUse[N, O]{},
		optionCache:      map[optionClaims[O]]bool{},
		unitCache:        map[optionClaims[O]]float64{},
		allocCache:       map[allocation[O]][]resourcev1.AllocationResult{},
		classClaims:      map[classClaims]int{},
		claimSpecs:       map[string]int{},
	}
	for _, c := range in.DeviceClasses {
		m.classes[c.Name] = c
	}
	for _, c := range in.Claims {
		m.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			k := poolKey{r.Driver, r.Pool}
			if m.allocated[k] == nil {
				m.allocated[k] = sets.New[structured.DeviceID]()
			}
			m.allocated[k].Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	for _, t := range in.ClaimTemplates {
		m.templates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
	}
	for _, g := range in.PodGroups {
		m.podGroups[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = g
	}
	for _, sl := range in.Slices {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			m.nodeSlices[*sl.Spec.NodeName] = append(m.nodeSlices[*sl.Spec.NodeName], sl)
		} else {
			m.otherSlices = append(m.otherSlices, sl)
		}
	}
	return m
}

// Changed tells the model that a node or a pod of the snapshot changed:
// the answers cached for the plan as it was are stale. O(1).
func (m *Model[N, O]) Changed() { m.gen++ }

// classLister is the allocator's DeviceClassLister.
type classLister map[string]*resourcev1.DeviceClass

// List returns every DeviceClass.
func (l classLister) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

// Get returns a DeviceClass by name.
func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// DeviceClass returns a DeviceClass by name, or nil.
func (m *Model[N, O]) DeviceClass(name string) *resourcev1.DeviceClass { return m.classes[name] }

// podGroup returns the PodGroup a pod belongs to, or nil.
func (m *Model[N, O]) podGroup(pod *corev1.Pod) (*schedulingv1alpha2.PodGroup, string) {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil, ""
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	return m.podGroups[types.NamespacedName{Namespace: pod.Namespace, Name: name}], name
}

// HeldForWorkload says which claim reserved for a live PodGroup is
// allocated on devices of node ("" when none): scale-down keeps such a
// node, since the group's pods come and go but its claim stays
// allocated until the group is gone (KEP-5729). O(workload claims).
func (m *Model[N, O]) HeldForWorkload(node *corev1.Node) string {
	for _, c := range m.claims {
		a := c.Status.Allocation
		if a == nil || a.NodeSelector == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.APIGroup != schedulingv1alpha2.GroupName || r.Resource != "podgroups" {
				continue
			}
			g := m.podGroups[types.NamespacedName{Namespace: c.Namespace, Name: r.Name}]
			if g == nil || g.UID != r.UID || g.DeletionTimestamp != nil {
				continue
			}
			sel, err := nodeaffinity.NewNodeSelector(a.NodeSelector)
			if err == nil && sel.Match(node) {
				return fmt.Sprintf("node %s holds devices of resourceclaim %s/%s, reserved for podgroup %s", node.Name, c.Namespace, c.Name, g.Name)
			}
		}
	}
	return ""
}
