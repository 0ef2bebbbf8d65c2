package snapshot

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/podutil"
)

// Base is a controller's model of its cluster kept from one round to the
// next: the existing nodes and the pods bound to them, with their classes
// and the counters those pods are counted in. Each round brings it up to
// date with the round's input by changing only what changed (Snapshot)
// and plans on it inside a fork that Release reverts, so that a round's
// cost follows the pending pods and the changes since the last round, not
// the cluster's size.
//
// What changed is found by identity, as the informer cache gives it: a
// node or pod object the base holds, with the same resourceVersion (and,
// for a pod, the same node), is the same; any other is taken off and
// added anew (a node with all its pods). A node that is another object
// (a new version, or a fresh copy) keeps its place when all the base
// reads of it is equal: labels, taints, unschedulable, allocatable and
// capacity, and how the planner reads it (group, taints to ignore); a
// kubelet's status heartbeat changes none of it. Objects must not be
// changed in place between rounds (the informer cache's never are).
//
// The base is built from scratch (New) on the first round, and again
// whenever what it does not follow incrementally changes: namespaces,
// PersistentVolumeClaims and volumes (they shape classes), the option
// keys, any dynamic resource allocation object or expected slice (DRA is
// rebuilt every round), a pod with resource claims, a node or pod listed
// twice, a round left open, or when the classes of pods gone since the
// last build outnumber the live ones.
//
// Not safe for concurrent use: one per controller, one round at a time.
type Base struct {
	s     *Snapshot
	memo  *Memo
	env   baseEnv
	nodes map[string]*baseNode
	pods  map[*corev1.Pod]*basePod
	gen   uint64
	open  bool
	mark  registryMark
	// Builds counts the rounds built from scratch, Syncs those brought up
	// to date incrementally (for tests and benchmarks).
	Builds, Syncs int
}

// baseNode is a node of the base and what the base read of it: its own
// copies, since a caller's copy of a node may change after the round.
type baseNode struct {
	n       *Node
	rv      string
	group   string
	labels  map[string]string
	ignore  []corev1.Taint
	taints  []corev1.Taint
	unsched bool
	gen     uint64
}

type basePod struct {
	p    *Pod
	rv   string
	node *Node
	gen  uint64
}

// registryMark is how many classes and counters the base had when a
// round began: what the round registers beyond them is dropped by
// Release.
type registryMark struct{ classes, counters, anti int }

// NewBase returns an empty base; its first round builds it.
func NewBase() *Base { return &Base{memo: NewMemo()} }

// Snapshot returns the snapshot of in for one round, to be handed back
// with Release when the round is done. It is the base brought up to date
// with in (or, when the base cannot follow in, a snapshot built from
// scratch), with a fork open: whatever the round does to it is undone by
// Release. in.Memo is ignored (the base keeps its own).
func (b *Base) Snapshot(in Input) (*Snapshot, error) {
	if b.open {
		b.s = nil // a round was not released: its changes cannot be told apart
		b.open = false
	}
	in.Memo = b.memo
	if !incrementalInput(in) {
		b.s = nil
		b.Builds++
		return New(in)
	}
	env := newBaseEnv(in)
	if b.s == nil || !b.env.equal(env) || b.deadClasses() || !b.sync(in) {
		if err := b.build(in); err != nil {
			return nil, err
		}
		b.Builds++
	} else {
		b.Syncs++
	}
	b.env = env
	b.openRound()
	return b.s, nil
}

// incrementalInput reports whether the base can follow in incrementally:
// no DRA objects and no node that will publish devices (the DRA model is
// rebuilt each round).
func incrementalInput(in Input) bool {
	d := in.DRA
	if len(d.DeviceClasses)+len(d.Claims)+len(d.ClaimTemplates)+len(d.Slices)+len(d.PodGroups) > 0 {
		return false
	}
	for _, n := range in.Nodes {
		if len(n.ExpectedSlices) > 0 {
			return false
		}
	}
	return true
}

// build makes the base from scratch and indexes its nodes and pods.
func (b *Base) build(in Input) error {
	b.s = nil
	s, err := New(in)
	if err != nil {
		return err
	}
	b.gen++
	b.nodes = make(map[string]*baseNode, len(s.Nodes))
	b.pods = make(map[*corev1.Pod]*basePod, len(in.Pods))
	for i, n := range s.Nodes {
		b.nodes[n.Name] = newBaseNode(in.Nodes[i], n, b.gen)
		for _, p := range n.Pods {
			b.pods[p.Pod] = &basePod{p: p, rv: p.ResourceVersion, node: n, gen: b.gen}
		}
	}
	s.memo = nil // the base classifies only the pods that changed
	b.s = s
	return nil
}

func newBaseNode(ni NodeInput, n *Node, gen uint64) *baseNode {
	return &baseNode{n: n, rv: ni.Node.ResourceVersion, group: ni.NodeGroup, labels: maps.Clone(ni.Node.Labels),
		ignore: slices.Clone(ni.IgnoreTaints), taints: slices.Clone(ni.Node.Spec.Taints), unsched: ni.Node.Spec.Unschedulable, gen: gen}
}

// same reports whether ni is the node the base holds, read the same way:
// the same object at the same version, or an object equal in all the
// base reads (a kubelet's status heartbeat changes none of it).
func (e *baseNode) same(ni NodeInput) bool {
	o := ni.Node
	if e.group != ni.NodeGroup || !taintsEqual(e.ignore, ni.IgnoreTaints) {
		return false
	}
	if e.n.Node == o && e.rv == o.ResourceVersion {
		return true
	}
	if e.unsched != o.Spec.Unschedulable || !taintsEqual(e.taints, o.Spec.Taints) || !maps.Equal(e.labels, o.Labels) ||
		e.n.AllowedPods != int(o.Status.Allocatable.Pods().Value()) {
		return false
	}
	alloc, capacity := FromList(o.Status.Allocatable), FromList(o.Status.Capacity)
	return resourcesEqual(&alloc, &e.n.Allocatable) && resourcesEqual(&capacity, &e.n.Capacity)
}

func resourcesEqual(a, b *Resources) bool {
	return a.MilliCPU == b.MilliCPU && a.Memory == b.Memory && a.EphemeralStorage == b.EphemeralStorage && maps.Equal(a.Scalar, b.Scalar)
}

func taintsEqual(a, b []corev1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
	})
}

// sync brings the base up to date with in. It returns false when in holds
// what the base does not follow (then the base must be built anew).
func (b *Base) sync(in Input) bool {
	s := b.s
	b.gen++
	gen := b.gen
	removed := false
	for _, ni := range in.Nodes {
		e := b.nodes[ni.Node.Name]
		switch {
		case e != nil && e.gen == gen:
			return false // listed twice: New reports it
		case e != nil && e.same(ni):
			e.n.Node, e.rv = ni.Node, ni.Node.ResourceVersion // the current object, equal in all the base read
			e.gen = gen
			continue
		case e != nil:
			b.removeNode(e)
			removed = true
		}
		n := newNode(ni)
		s.AddNode(n)
		b.nodes[n.Name] = newBaseNode(ni, n, gen)
	}
	for name, e := range b.nodes {
		if e.gen != gen {
			b.removeNode(e)
			delete(b.nodes, name)
			removed = true
		}
	}
	if removed {
		s.reindexShapes()
	}
	seen := 0
	for _, p := range in.Pods {
		e := b.pods[p]
		if e != nil && e.gen != gen && e.rv == p.ResourceVersion && e.node.Name == p.Spec.NodeName {
			// The same version on the same node: unchanged (a pod's
			// phase changes with its version; e.node is still in the
			// base, removeNode forgets the pods of a node it removes).
			e.gen = gen
			seen++
			continue
		}
		if !podutil.IsBound(p) {
			continue
		}
		n := s.byName[p.Spec.NodeName]
		if n == nil {
			continue
		}
		if e != nil {
			if e.gen == gen {
				return false // listed twice
			}
			s.unplace(e.p)
		}
		if len(p.Spec.ResourceClaims) > 0 {
			return false
		}
		c, err := s.classify(p, true)
		if err != nil {
			return false // New reports it
		}
		placed := &Pod{Pod: p, Class: c}
		s.AddPod(placed, n)
		b.pods[p] = &basePod{p: placed, rv: p.ResourceVersion, node: n, gen: gen}
		seen++
	}
	if seen == len(b.pods) {
		return true // every pod the base holds is in in.Pods
	}
	for k, e := range b.pods {
		if e.gen != gen {
			s.unplace(e.p)
			delete(b.pods, k)
		}
	}
	return true
}

// removeNode takes a node and its pods out of the base.
func (b *Base) removeNode(e *baseNode) {
	s, n := b.s, e.n
	for len(n.Pods) > 0 {
		p := n.Pods[len(n.Pods)-1]
		s.unplace(p)
		delete(b.pods, p.Pod)
	}
	for _, k := range s.counters {
		if k.kind == kindSpread && k.eligible(n) {
			k.removeDomain(n.Labels()[k.key])
		}
	}
	s.account(n, -1)
	s.dra.Changed()
	i := slices.Index(s.Nodes, n)
	s.Nodes = slices.Delete(s.Nodes, i, i+1)
	delete(s.byName, n.Name)
}

// deadClasses reports whether the classes no pod is placed in outnumber
// the others (workloads rolled out leave theirs behind): a build from
// scratch then drops them.
func (b *Base) deadClasses() bool {
	if b.s == nil {
		return false
	}
	dead := 0
	for _, c := range b.s.classList {
		if c.placed == 0 {
			dead++
		}
	}
	return dead > 64 && dead > len(b.s.classList)/2
}

// openRound forks the base and marks its registries.
func (b *Base) openRound() {
	s := b.s
	b.mark = registryMark{classes: len(s.classList), counters: len(s.counters), anti: len(s.existingAnti)}
	s.Fork()
	b.open = true
}

// Release ends the round of s: on the base, it reverts every change the
// round made and drops the classes, counters, templates and limits it
// registered. On a snapshot the base did not give out, or a nil base, it
// does nothing.
func (b *Base) Release(s *Snapshot) {
	if b == nil || !b.open || s != b.s {
		return
	}
	b.open = false
	if len(s.marks) != 1 {
		b.s = nil // a fork of the round is still open
		return
	}
	s.Revert()
	m := b.mark
	for _, c := range s.classList[m.classes:] {
		delete(s.classes, c.key)
	}
	clear(s.classList[m.classes:])
	s.classList = s.classList[:m.classes]
	for _, k := range s.counters[m.counters:] {
		delete(s.counterBySignature, k.signature)
	}
	clear(s.counters[m.counters:])
	s.counters = s.counters[:m.counters]
	s.existingAnti = s.existingAnti[:m.anti]
	for _, c := range s.classList {
		c.dropCounters(m)
	}
	for _, n := range s.Nodes {
		if len(n.elig) > m.counters {
			n.elig = n.elig[:m.counters]
		}
	}
	s.templates = nil
	clear(s.templateOff)
	clear(s.limits)
	s.clusterLimit = Limit{}
	s.addOnPods = nil
}

// dropCounters forgets the counters registered at or after the mark.
func (c *Class) dropCounters(m registryMark) {
	newer := func(k *Counter) bool { return k != nil && k.ID >= m.counters }
	c.counters = slices.DeleteFunc(c.counters, newer)
	if slices.ContainsFunc(c.spreadCounters, newer) {
		c.spreadCounters = nil
	}
	if slices.ContainsFunc(c.softCounters, newer) {
		c.softCounters = nil
	}
	if slices.ContainsFunc(c.antiCounters, newer) {
		c.antiCounters = nil
	}
	if newer(c.affinityCounter) {
		c.affinityCounter = nil
	}
	c.blocking = slices.DeleteFunc(c.blocking, newer)
	c.blockingSeen = min(c.blockingSeen, m.anti)
	if len(c.matchCache) > m.counters {
		c.matchCache = c.matchCache[:m.counters]
	}
}

// baseEnv is what the base's classes and counters were derived from
// besides the nodes and pods: namespaces (namespace selectors), claims
// and volumes (a bound volume's node affinity), the option keys.
type baseEnv struct {
	namespaces, claims, volumes map[types.NamespacedName]objectVersion
	optionKeys                  []string
}

// objectVersion identifies a version of an object: its resourceVersion,
// or, for an object without one, the object itself.
type objectVersion struct {
	rv  string
	obj any
}

func (v objectVersion) same(o objectVersion) bool {
	if v.rv != "" {
		return v.rv == o.rv
	}
	return v.obj == o.obj
}

func newBaseEnv(in Input) baseEnv {
	return baseEnv{namespaces: versions(in.Namespaces), claims: versions(in.Claims), volumes: versions(in.Volumes), optionKeys: in.OptionKeys}
}

type versioned interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}

func versions[T versioned](objs []T) map[types.NamespacedName]objectVersion {
	out := make(map[types.NamespacedName]objectVersion, len(objs))
	for _, o := range objs {
		out[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = objectVersion{rv: o.GetResourceVersion(), obj: o}
	}
	return out
}

func (e baseEnv) equal(o baseEnv) bool {
	same := func(a, b map[types.NamespacedName]objectVersion) bool {
		return maps.EqualFunc(a, b, objectVersion.same)
	}
	return same(e.namespaces, o.namespaces) && same(e.claims, o.claims) && same(e.volumes, o.volumes) &&
		slices.Equal(e.optionKeys, o.optionKeys)
}
