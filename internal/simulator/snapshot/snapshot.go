package snapshot

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
)

// Input is what a snapshot is built from.
type Input struct {
	// Nodes with their options (group, taints to ignore).
	Nodes []NodeInput
	// Pods bound to nodes. Pods on nodes not in Nodes, and pods that
	// have finished (Succeeded, Failed), are ignored.
	Pods []*corev1.Pod
	// Namespaces, for namespace selectors of pod affinity terms.
	Namespaces []*corev1.Namespace
	// Claims and volumes, to resolve the node affinity of bound volumes.
	Claims  []*corev1.PersistentVolumeClaim
	Volumes []*corev1.PersistentVolume
	// DRA are the dynamic resource allocation objects: device classes,
	// claims and their templates, published slices, PodGroups.
	DRA DRA
	// OptionKeys are the node label keys that differ between the options of
	// a planned node (instance type, capacity type, architecture).
	OptionKeys []string
	// Memo, when set, carries pod fingerprints over from the previous
	// build with the same memo.
	Memo *Memo
	// Held are pods placed for one round only, as if bound to
	// Spec.NodeName (a pending pod nominated to a node, planned where it
	// is nominated): a base places them in the round's fork, so that the
	// next round does not have them.
	Held []*corev1.Pod
	// Changes, for a base (Base.Snapshot), are the pods that changed
	// since the round that was given the changes before them: the base
	// then reads them instead of looking at every pod of Pods. Pods must
	// still be every pod, as of To or later (a base built anew reads
	// them). New ignores Changes.
	Changes *PodChanges
}

// NodeInput is an existing node and how to read it.
type NodeInput struct {
	Node      *corev1.Node
	NodeGroup string
	// IgnoreTaints are taints that will go away on their own (startup
	// taints; not-ready on a node that is still launching). Matched by key
	// and effect.
	IgnoreTaints []corev1.Taint
	// ExpectedSlices are the ResourceSlices the node will publish (from
	// its instance type), used while it has published none.
	ExpectedSlices []*resourcev1.ResourceSlice
	// HostPorts are host ports held on the node by pods not bound there
	// yet (the DaemonSets' pods of a node coming up): no pod that asks
	// for one of them is placed there.
	HostPorts []HostPort
}

// Snapshot is the cluster as the simulator sees it.
type Snapshot struct {
	Nodes  []*Node
	byName map[string]*Node
	// rooms bound the free room of blocks of Nodes (RoomFrom).
	rooms     rooms
	templates []*Node
	// templateOff marks templates that cannot launch more nodes.
	templateOff map[*Node]bool
	// launchable keeps LaunchableForClass's answers for classes with
	// device claims while the templates are the same.
	launchable map[launchKey]bool

	namespaces map[string]labels.Set
	classes    map[uint64]*Class
	classList  []*Class
	fp         *fingerprinter
	memo       *Memo
	vols       volumeLookup
	dra        *draModel
	optionKeys sets.Set[string]
	// widening is Widen's buffer, kept from call to call.
	widening  []*Option
	addOnPods map[string]int
	shapes    shapes
	// oncePodUsers counts, per ReadWriteOncePod claim, the placed pods
	// that use it.
	oncePodUsers map[types.NamespacedName]int

	counters []*Counter
	// taintBuf is setTaints' list of counters, kept for the next call.
	taintBuf           []honoringCounter
	counterBySignature map[string]*Counter
	existingAnti       []*Counter
	groups             map[string]*GroupUsage
	total              Resources
	totalSlots         int64
	totalNodes         int
	limits             map[string]Limit
	clusterLimit       Limit

	journal []undo
	marks   []int
}

// OncePodClaimInUse reports whether a placed pod uses the
// ReadWriteOncePod claim k.
func (s *Snapshot) OncePodClaimInUse(k types.NamespacedName) bool { return s.oncePodUsers[k] > 0 }

// GroupUsage is how many nodes a node group has in the snapshot and their
// total capacity.
type GroupUsage struct {
	Nodes    int
	Capacity Resources
	// Slots are the pod slots of its nodes (spec.limits.pods).
	Slots int64
}

// New builds a snapshot.
func New(in Input) (*Snapshot, error) {
	s := &Snapshot{
		byName:             map[string]*Node{},
		templateOff:        map[*Node]bool{},
		namespaces:         map[string]labels.Set{},
		classes:            map[uint64]*Class{},
		fp:                 newFingerprinter(),
		vols:               newVolumeLookup(in.Claims, in.Volumes),
		optionKeys:         sets.New(in.OptionKeys...),
		groups:             map[string]*GroupUsage{},
		counterBySignature: map[string]*Counter{},
		limits:             map[string]Limit{},
	}
	if in.Memo != nil {
		s.memo = in.Memo
		s.fp.seed = in.Memo.seed
		in.Memo.startBuild()
	}
	s.dra = dynamicresources.New[*Node, *Option](in.DRA, (*draNodes)(s))
	s.fp.claimID = s.dra.ClaimID
	for _, ns := range in.Namespaces {
		s.namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	for _, ni := range in.Nodes {
		if _, dup := s.byName[ni.Node.Name]; dup {
			return nil, fmt.Errorf("node %q appears twice", ni.Node.Name)
		}
		s.AddNode(newNode(ni))
	}
	// One allocation for the bound pods, not one each: on a large cluster
	// they are most of what a snapshot allocates.
	placed := make([]Pod, 0, len(in.Pods)+len(in.Held))
	for _, pods := range [][]*corev1.Pod{in.Pods, in.Held} {
		for _, p := range pods {
			n, c, err := s.boundClass(p)
			if err != nil {
				return nil, err
			}
			if n == nil {
				continue
			}
			placed = append(placed, Pod{Pod: p, Class: c})
			s.AddPod(&placed[len(placed)-1], n)
		}
	}
	return s, nil
}

// newNode is an existing node as the snapshot holds it. A node being
// deleted is held cordoned: kube-scheduler may still bind a pod there, but
// the pod would go with the node, so no plan counts on its room.
func newNode(ni NodeInput) *Node {
	taints := effectiveTaints(ni.Node.Spec.Taints, ni.IgnoreTaints)
	return &Node{
		Node:          ni.Node,
		Taints:        taints,
		Unschedulable: unschedulable(ni.Node),
		Waits:         !nodeutil.Ready(ni.Node) || len(taints) < len(ni.Node.Spec.Taints),
		Allocatable:   FromList(ni.Node.Status.Allocatable),
		AllowedPods:   int(ni.Node.Status.Allocatable.Pods().Value()),
		NodeGroup:     ni.NodeGroup,
		Capacity:      FromList(ni.Node.Status.Capacity),

		ExpectedSlices: ni.ExpectedSlices,
		HostPorts:      slices.Clone(ni.HostPorts),
	}
}

// unschedulable reports whether no plan puts a pod on n: it is cordoned,
// or being deleted.
func unschedulable(n *corev1.Node) bool {
	return n.Spec.Unschedulable || n.DeletionTimestamp != nil
}

func effectiveTaints(taints, ignore []corev1.Taint) []corev1.Taint {
	if len(ignore) == 0 {
		return taints
	}
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		skip := false
		for _, i := range ignore {
			if t.Key == i.Key && t.Effect == i.Effect {
				skip = true
				break
			}
		}
		if !skip {
			out = append(out, t)
		}
	}
	return out
}

// Node returns the node with the given name, or nil.
func (s *Snapshot) Node(name string) *Node { return s.byName[name] }

// NamespaceLabels returns the labels of a namespace (nil if unknown).
func (s *Snapshot) NamespaceLabels(ns string) labels.Set { return s.namespaces[ns] }

// Classes returns every class known to the snapshot.
func (s *Snapshot) Classes() []*Class { return s.classList }

// ReferencesOptionKeys reports whether a class's node selection, or its
// bound volumes' node affinity, names a label that differs between the
// options of a planned node (Class.MatchesOption then decides per option).
func (s *Snapshot) ReferencesOptionKeys(c *Class) bool {
	for k := range c.AffinityKeys {
		if s.optionKeys.Has(k) {
			return true
		}
	}
	for k := range c.VolumeKeys {
		if s.optionKeys.Has(k) {
			return true
		}
	}
	return false
}

// Classify returns the class of a pod to place (pending, or taken off its
// node), creating it on first sight.
func (s *Snapshot) Classify(p *corev1.Pod) (*Class, error) { return s.classify(p, false) }

// classify returns a pod's class. The classes of the pods the snapshot
// is built with (placed) leave the node out (Class.NodeName is empty):
// on a large cluster the pods of one workload on a thousand nodes are one
// class, not a thousand. Those classes are never given to the filters
// (a pod moved is classified anew, unbound).
func (s *Snapshot) classify(p *corev1.Pod, placed bool) (*Class, error) {
	var key uint64
	if placed && s.memo != nil {
		key = s.memo.sum(s.fp, p)
	} else {
		key = s.fp.sum(p, placed)
	}
	if c, ok := s.classes[key]; ok {
		return c, nil
	}
	c, err := newClass(len(s.classList), p, placed, s.vols, s.dra, s.addOnPods)
	if err != nil {
		return nil, err
	}
	c.key = key
	s.classes[key] = c
	s.classList = append(s.classList, c)
	for _, k := range s.counters {
		if k.matches(s, c) {
			c.counters = append(c.counters, k)
		}
	}
	if len(c.AntiAffinity) > 0 {
		s.registerExistingAnti(c)
	}
	return c, nil
}

// SetAddOnPods says, by companion share key, how many pods the add-on of
// a pending pod with that key stands for besides the pod itself: the
// planner folds pods that must run next to a pending pod into its add-on
// (scaleup's followers), and a node's pod capacity must hold them too.
// Set it before the pods are classified.
func (s *Snapshot) SetAddOnPods(m map[string]int) { s.addOnPods = m }

// Group returns the usage of a node group.
func (s *Snapshot) Group(name string) GroupUsage {
	if g := s.groups[name]; g != nil {
		return *g
	}
	return GroupUsage{}
}

// Total is the capacity of all nodes in the snapshot.
func (s *Snapshot) Total() Resources { return s.total }

// AddNode adds a node. Planned nodes must carry a unique name; a node with
// Flex options gets its Allocatable from them and counts, for limits, as
// its cheapest option.
func (s *Snapshot) AddNode(n *Node) {
	if n.Flex != nil {
		n.envelope()
		n.Current = Cheapest(n.Flex.Options)
		n.Capacity = *n.Current.Counted()
	}
	n.pos = int32(len(s.Nodes))
	s.Nodes = append(s.Nodes, n)
	shadowed := s.byName[n.Name]
	s.byName[n.Name] = n
	s.addToShape(n)
	s.dra.Changed()
	s.account(n, 1)
	s.record(undo{kind: undoAddNode, node: n, shadowed: shadowed})
}

// account counts a node in (sign 1) or out of (-1) its group's size and
// capacity, the cluster's total, and the domains of spread counters.
func (s *Snapshot) account(n *Node, sign int) {
	for _, k := range s.counters {
		if k.kind == kindSpread && k.eligible(n) {
			if sign > 0 {
				k.addDomain(n.Labels()[k.key])
			} else {
				k.removeDomain(n.Labels()[k.key])
			}
		}
	}
	g := s.group(n.NodeGroup)
	g.Nodes += sign
	if sign > 0 {
		n.slots = n.podSlots()
		g.Capacity.Add(&n.Capacity)
	} else {
		g.Capacity.Sub(&n.Capacity)
	}
	g.Slots += int64(sign) * n.slots
	if !inClusterTotal(n) {
		return
	}
	if sign > 0 {
		s.total.Add(&n.Capacity)
	} else {
		s.total.Sub(&n.Capacity)
	}
	s.totalSlots += int64(sign) * n.slots
	s.totalNodes += sign
}

// LabelVirtualKubelet and VirtualKubelet mark a virtual kubelet's node
// (type: virtual-kubelet, as Azure's ACI connector and other virtual
// kubelets label theirs).
const (
	LabelVirtualKubelet = "type"
	VirtualKubelet      = "virtual-kubelet"
)

// inClusterTotal reports whether a node counts in the cluster's total
// for the cluster limits: not a virtual kubelet's node of no group. Such
// a node stands for a serverless pool (an ACI virtual node reports 10,000
// cpu) and would pass any limit alone; Cluster Autoscaler leaves it out
// of its totals too.
func inClusterTotal(n *Node) bool { return InClusterTotal(n.Node, n.NodeGroup) }

// InClusterTotal reports whether a node of node group group ("": none)
// counts in the cluster's total (inClusterTotal): in the cluster limits
// and --max-nodes-total.
func InClusterTotal(n *corev1.Node, group string) bool {
	return group != "" || n.Labels[LabelVirtualKubelet] != VirtualKubelet
}

func (s *Snapshot) group(name string) *GroupUsage {
	g := s.groups[name]
	if g == nil {
		g = &GroupUsage{}
		s.groups[name] = g
	}
	return g
}

// setCapacity changes what a node accounts for in limits: capacity c,
// and the pod slots of its current option.
func (s *Snapshot) setCapacity(n *Node, c Resources) {
	g := s.group(n.NodeGroup)
	g.Capacity.Sub(&n.Capacity)
	if inClusterTotal(n) {
		s.total.Sub(&n.Capacity)
	}
	n.Capacity = c
	g.Capacity.Add(&n.Capacity)
	slots := n.podSlots()
	g.Slots += slots - n.slots
	if inClusterTotal(n) {
		s.total.Add(&n.Capacity)
		s.totalSlots += slots - n.slots
	}
	n.slots = slots
}

// TotalNodes is how many nodes the snapshot has, planned ones included,
// as the cluster's total counts them (not a virtual kubelet's node).
func (s *Snapshot) TotalNodes() int { return s.totalNodes }

// TotalSlots are the pod slots of all nodes in the snapshot.
func (s *Snapshot) TotalSlots() int64 { return s.totalSlots }

// boundClass returns the node of bound pod p and p's class; no node when
// p is not bound, or bound to a node the snapshot does not have (such a
// pod is left out).
func (s *Snapshot) boundClass(p *corev1.Pod) (*Node, *Class, error) {
	n := s.byName[p.Spec.NodeName]
	if n == nil || !podutil.IsBound(p) {
		return nil, nil, nil
	}
	c, err := s.classify(p, true)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return n, c, nil
}
