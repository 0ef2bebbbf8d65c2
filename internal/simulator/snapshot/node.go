package snapshot

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
)

// Node is a node as the filters see it: an existing node, a node being
// launched, a node planned in this round, or a node group template (a
// hypothetical node that is a potential topology domain but holds no pods).
type Node struct {
	// Node is the API object; for planned nodes and templates a synthetic
	// one carrying the labels the node will have. Filters read its labels
	// and name.
	*corev1.Node

	// Taints are the taints that keep pods off: the node's taints minus
	// those that will go away on their own (startup taints, the not-ready
	// taint of a node that is still launching).
	Taints        []corev1.Taint
	Unschedulable bool
	// Waits is true for an existing node kube-scheduler places no pod on
	// yet: it is not Ready, or carries a taint that will go on its own
	// (NodeInput.IgnoreTaints). A pod that fits a node that is up goes
	// there first, as kube-scheduler binds it there now.
	Waits       bool
	Allocatable Resources
	AllowedPods int
	// slots are the pod slots the node accounts for in its group's and
	// the cluster's limits (podSlots when it was last accounted).
	slots     int64
	Requested Resources
	Pods      []*Pod
	HostPorts []HostPort

	// NodeGroup is the node's group, "" for nodes berth does not manage.
	NodeGroup string
	// Planned is true for nodes created by this plan.
	Planned bool
	// Template is true for node group templates.
	Template bool
	// Wanted marks a template a pending pod of the round could use: a node
	// may be launched from it, so every spread counts it as a potential
	// domain (Counter.potentialFrom). The planner sets it each round.
	Wanted bool
	// Flex is set on a planned node whose instance type and capacity type
	// are not chosen yet: it lists the options still possible.
	Flex *Flex
	// Capacity is what the node adds to limits: its capacity, or for a
	// planned node the capacity of Current.
	Capacity Resources
	// Current is, for a planned node, the option it would be launched as
	// now: the cheapest of its remaining options.
	Current *Option
	// ExpectedSlices are the ResourceSlices an existing node will publish
	// once its DRA drivers run (from its instance type); used while it
	// has published none.
	ExpectedSlices []*resourcev1.ResourceSlice
	// Shape is the ID of the node's shape among existing nodes: nodes with
	// the same labels (the hostname's value aside) and Taints share it, and
	// a static filter failure (predicates.Status.Static) holds for all of
	// them. Zero for planned nodes and templates.
	Shape int32
	// pos is the node's index in Snapshot.Nodes (for the room bounds).
	pos int32

	// elig caches, by counter ID, whether the node is counted by the
	// counter.
	elig []tristate
	// shareKeys counts the pods on the node per companion share key.
	shareKeys map[string]int
	// podCount is how many pods the node's pods stand for: one each, and
	// the pods folded into a pending pod's add-on (Class.AddOnPods).
	podCount int
}

// Counted is what a node launched as the option counts for in limits:
// Capacity, or Allocatable.
func (o *Option) Counted() *Resources {
	if o.Capacity != nil {
		return o.Capacity
	}
	return &o.Allocatable
}

// Option is one way to launch a planned node: an instance type bought at
// one capacity type in the node's zone.
type Option struct {
	InstanceType string
	CapacityType string
	Price        float64
	Allocatable  Resources
	// Capacity is what a node launched as the option counts for in the
	// group's and cluster's limits, when not its Allocatable: its type's
	// declared capacity, where the option's allocatable is what the
	// group's nodes were seen to have (less: kube-reserved), as an
	// existing node counts its capacity, not its allocatable.
	Capacity    *Resources
	AllowedPods int
	// Overhead is what the DaemonSet pods that would run on such a node
	// request; OverheadPods is how many they are.
	Overhead     Resources
	OverheadPods int
	// OverheadPorts are the host ports those DaemonSet pods hold.
	OverheadPorts []HostPort
	// Node carries every label a node launched from this option has, for
	// pods whose node affinity names option-specific labels.
	Node *corev1.Node
	// Slices are the ResourceSlices a node of this option publishes, for
	// the node named Node.Name.
	Slices []*resourcev1.ResourceSlice
	// Ref lets the planner find its own record of the option.
	Ref any

	// free caches Free: an option never changes once built.
	free     *Resources
	freePods int
}

// Free returns what is left for workload pods on a node of this option.
// The result shares its Scalar map with the option's cache: Clone it
// before changing it (Sub on a copy would change every later Free).
func (o *Option) Free() (Resources, int) {
	if o.free == nil {
		free := o.Allocatable.Clone()
		free.Sub(&o.Overhead)
		o.free, o.freePods = &free, o.AllowedPods-o.OverheadPods
	}
	return *o.free, o.freePods
}

// Flex is the set of options a planned node may still be launched as.
// Adding a pod narrows it to the options the node's pods fit together.
// A Flex is never changed once built (its Options neither assigned nor
// changed in place): a node that changes gets a new Flex, and a Revert
// puts back the old one with what it caches.
type Flex struct {
	Options []*Option
	// bounds caches what every option holds and the largest of them
	// (holdsAll).
	bounds *flexBounds
}

// flexBounds are the least room and pod slots any option of a Flex leaves
// beside its DaemonSets, and the most capacity (as limits count it:
// Option.Counted) and pod slots any has.
type flexBounds struct {
	cpu, memory, storage int64
	slots                int
	most                 Resources
	mostPods             int
}

// boundsOf returns f's bounds, worked out on first use.
func (f *Flex) boundsOf() *flexBounds {
	if f.bounds != nil {
		return f.bounds
	}
	b := &flexBounds{cpu: math.MaxInt64, memory: math.MaxInt64, storage: math.MaxInt64, slots: math.MaxInt}
	for _, o := range f.Options {
		free, p := o.Free()
		b.cpu, b.memory, b.storage, b.slots = min(b.cpu, free.MilliCPU), min(b.memory, free.Memory), min(b.storage, free.EphemeralStorage), min(b.slots, p)
		b.most.Max(o.Counted())
		b.mostPods = max(b.mostPods, o.AllowedPods)
	}
	f.bounds = b
	return b
}

// holdsAll reports whether every option holds a node's pods (used, in
// slots) plus a pod of req standing for pods, and every option is within
// the limits' room h: then a pod narrows nothing, which it tells without
// looking at each option. A false answer says only that some option may
// not (and always for a pod asking for extended resources).
func (f *Flex) holdsAll(used *Resources, slots int, req *Resources, pods int, h *LimitRoom) bool {
	if len(req.Scalar) > 0 || len(f.Options) == 0 {
		return false
	}
	b := f.boundsOf()
	if slots+pods > b.slots || (req.MilliCPU > 0 && req.MilliCPU > b.cpu-used.MilliCPU) ||
		(req.Memory > 0 && req.Memory > b.memory-used.Memory) || (req.EphemeralStorage > 0 && req.EphemeralStorage > b.storage-used.EphemeralStorage) {
		return false
	}
	return f.WithinLimits(h)
}

// WithinLimits reports whether every option of f is within the limits'
// room h, by its largest capacity and pod slots (cached): a caller may
// then take the options as they are.
func (f *Flex) WithinLimits(h *LimitRoom) bool {
	b := f.boundsOf()
	return len(f.Options) > 0 && h.AllowsPods(int64(b.mostPods)) && h.Allows(&b.most)
}

// Pod is a pod in the snapshot.
type Pod struct {
	*corev1.Pod
	Class *Class
	// Node is where the pod is placed, nil for pending pods.
	Node *Node
	// Unbound says the pod is charged as one the scheduler has yet to
	// place (its companion's add-on included) although its Pod names a
	// node: the pod of a node being removed, rehomed as its controller
	// will make it again, without copying it to clear spec.nodeName.
	Unbound bool
	// slot is the pod's index in Node.Pods.
	slot int
	// addOn is true while the pod's node is charged its companion's
	// requests too.
	addOn bool
	// devices are what the pod's placement allocated (DRA).
	devices *dynamicresources.Placement[*Option]
}

// pending reports whether the pod is charged as a pod not bound yet.
func (p *Pod) pending() bool { return p.Unbound || p.Spec.NodeName == "" }

// podSlots are the pod slots the node accounts for in limits: its
// current option's, or its own.
func (n *Node) podSlots() int64 {
	if n.Current != nil {
		return int64(n.Current.AllowedPods)
	}
	return int64(n.AllowedPods)
}

// envelope sets Allocatable and AllowedPods of a flexible node to the
// component-wise maximum of what its options leave free, so that a pod that
// does not fit even that fails fast.
func (n *Node) envelope() {
	var alloc Resources
	pods := 0
	for _, o := range n.Flex.Options {
		free, p := o.Free()
		alloc.Max(&free)
		pods = max(pods, p)
	}
	n.Allocatable, n.AllowedPods = alloc, pods
}

// FitsOption reports whether the node's pods plus a pod that requests req
// and stands for pods pods (Class.PodsOn) fit option o.
func (n *Node) FitsOption(o *Option, req *Resources, pods int) bool {
	if n.podCount+pods+o.OverheadPods > o.AllowedPods {
		return false
	}
	return fitsWithOverhead(req, &n.Requested, &o.Overhead, &o.Allocatable)
}

// PodCount is how many pods the node holds, counting those folded into a
// pending pod's add-on: what its pod capacity must hold.
func (n *Node) PodCount() int { return n.podCount }

// Labels returns the node's labels.
func (n *Node) Labels() map[string]string { return n.Node.Labels }

func (n *Node) eligCache(id int) tristate {
	if id < len(n.elig) {
		return n.elig[id]
	}
	return unknown
}

func (n *Node) setEligCache(id int, v tristate) {
	for len(n.elig) <= id {
		n.elig = append(n.elig, unknown)
	}
	n.elig[id] = v
}

// tristate is a cached yes/no answer that may not be known yet.
type tristate int8

const (
	unknown tristate = iota
	yes
	no
)

// of returns yes or no.
func of(b bool) tristate {
	if b {
		return yes
	}
	return no
}
