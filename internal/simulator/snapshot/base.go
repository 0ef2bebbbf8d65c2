package snapshot

import (
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
// Looking at every pod is one map lookup each (about 15 ms at 150,000
// pods). A controller that keeps the changes its informer's events tell
// (Input.Changes) spares it: the base then reads only the pods that
// changed, and the nodes. A pod bound to a node the base does not have
// is kept aside until the node comes. Pods held for one round only
// (Input.Held) are placed in the round's fork.
//
// The base is built from scratch (New) on the first round, and again
// whenever what it does not follow incrementally changes:
// PersistentVolumeClaims and volumes (they shape classes), the option
// keys, any dynamic resource allocation object or expected slice (DRA is
// rebuilt every round), a pod with resource claims, a node or pod listed
// twice, a round left open or one that panicked, or when the classes of
// pods (or the shapes of nodes) gone since the last build outnumber the
// live ones.
//
// Not safe for concurrent use: one per controller, one round at a time.
type Base struct {
	s     *Snapshot
	memo  *Memo
	env   baseEnv
	nodes map[string]*baseNode
	pods  map[*corev1.Pod]*basePod
	// byKey holds the same pods by name (the changes name pods).
	byKey map[types.NamespacedName]*basePod
	// loose are the bound pods whose node the base does not have (yet).
	loose map[types.NamespacedName]*corev1.Pod
	gen   uint64
	open  bool
	mark  registryMark
	// changesTo is where the changes the last round was given ended
	// (changesKnown: it was given some); postponed are changes of rounds
	// that did not plan since.
	changesTo    uint64
	changesKnown bool
	postponed    *PodChanges
	// Builds counts the rounds built from scratch, Syncs those brought up
	// to date incrementally, FromChanges those of them that read only
	// the changed pods (for tests and benchmarks).
	Builds, Syncs, FromChanges int
}

// basePod is a bound pod of the base (placed on p.Node) and the version
// it was added at.
type basePod struct {
	p   *Pod
	rv  string
	gen uint64
}

// registryMark is how many classes and counters the base had when a
// round began: what the round registers beyond them is dropped by
// Release.
type registryMark struct{ classes, counters, anti int }

// NewBase returns an empty base; its first round builds it.
func NewBase() *Base { return &Base{memo: NewMemo(), loose: map[types.NamespacedName]*corev1.Pod{}} }

// Snapshot returns the snapshot of in for one round, to be handed back
// with Release when the round is done. It is the base brought up to date
// with in (or, when the base cannot follow in, a snapshot built from
// scratch), with a fork open: whatever the round does to it is undone by
// Release. in.Memo is ignored (the base keeps its own).
func (b *Base) Snapshot(in Input) (*Snapshot, error) {
	if b.open {
		b.s = nil // a round was not released, or panicked: its changes cannot be told apart
	}
	// Open from here: a panic while the base is brought up to date leaves
	// it half done, and the next round builds it anew.
	b.open = true
	in.Memo = b.memo
	if !incrementalInput(in) {
		b.s = nil
		b.Builds++
		return New(in)
	}
	held := in.Held
	in.Held = nil // placed in the round's fork
	in.Changes = b.changesOf(in.Changes)
	env := newBaseEnv(in)
	if b.s == nil || !b.env.shapesClasses(env) || b.stale() || !b.sync(in) {
		if err := b.build(in); err != nil {
			return nil, err
		}
		b.Builds++
	} else {
		b.followNamespaces(in, env)
		b.Syncs++
	}
	b.env = env
	b.noteChanges(in.Changes)
	b.openRound()
	if err := b.hold(held); err != nil {
		b.open, b.s = false, nil
		return nil, err
	}
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
	b.byKey = make(map[types.NamespacedName]*basePod, len(in.Pods))
	for i, n := range s.Nodes {
		b.nodes[n.Name] = newBaseNode(in.Nodes[i], n, b.gen)
		for _, p := range n.Pods {
			e := &basePod{p: p, rv: p.ResourceVersion, gen: b.gen}
			b.pods[p.Pod], b.byKey[keyOf(p.Pod)] = e, e
		}
	}
	s.memo = nil // the base classifies only the pods that changed
	b.s = s
	b.looseOf(in.Pods)
	return nil
}

// sync brings the base up to date with in: the nodes, and the pods that
// in.Changes say changed, or every pod when the base cannot follow the
// changes. It returns false when in holds what the base does not follow
// (then the base must be built anew).
func (b *Base) sync(in Input) bool {
	b.gen++
	gen := b.gen
	if !b.syncNodes(in, gen) {
		return false
	}
	if b.followsChanges(in.Changes) {
		b.FromChanges++
		return b.applyChanges(in.Changes, gen)
	}
	return b.scanPods(in, gen)
}

// syncNodes brings the base's nodes up to date with in.Nodes; the pods of
// a node taken off are kept aside (loose) until their node comes back.
func (b *Base) syncNodes(in Input, gen uint64) bool {
	s := b.s
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
	return true
}

// scanPods brings the base's pods up to date with every pod of in.Pods.
// O(pods): one map lookup each.
func (b *Base) scanPods(in Input, gen uint64) bool {
	clear(b.loose)
	seen := 0
	for _, p := range in.Pods {
		e := b.pods[p]
		if e != nil && e.gen != gen && e.rv == p.ResourceVersion && e.p.Node.Name == p.Spec.NodeName {
			// The same version on the same node: unchanged (a pod's
			// phase changes with its version; its node is still in the
			// base, removeNode forgets the pods of a node it removes).
			e.gen = gen
			seen++
			continue
		}
		if !podutil.IsBound(p) {
			continue
		}
		if e != nil {
			if e.gen == gen {
				return false // listed twice
			}
			b.drop(e)
		}
		if !b.add(p, gen) {
			return false
		}
		if b.pods[p] != nil {
			seen++
		}
	}
	if seen == len(b.pods) {
		return true // every pod the base holds is in in.Pods
	}
	for _, e := range b.pods {
		if e.gen != gen {
			b.drop(e)
		}
	}
	return true
}

// removeNode takes a node and its pods out of the base.
func (b *Base) removeNode(e *baseNode) {
	s, n := b.s, e.n
	for len(n.Pods) > 0 {
		p := n.Pods[len(n.Pods)-1]
		if e := b.pods[p.Pod]; e != nil {
			b.drop(e)
		} else {
			s.unplace(p) // not the base's (a round left open): taken off all the same
		}
		b.loose[keyOf(p.Pod)] = p.Pod
	}
	s.account(n, -1)
	s.dra.Changed()
	i := int(n.pos)
	s.Nodes = slices.Delete(s.Nodes, i, i+1)
	for j := i; j < len(s.Nodes); j++ {
		s.Nodes[j].pos = int32(j)
	}
	s.roomsFrom(i)
	delete(s.byName, n.Name)
}

// stale reports whether what the base keeps for objects that are gone
// outnumbers the rest: classes no pod is placed in (workloads rolled out
// leave theirs behind), or node shapes no node has (nodes with labels of
// their own). A build from scratch then drops them.
func (b *Base) stale() bool {
	if b.s == nil {
		return false
	}
	mostly := func(dead, all int) bool { return dead > 64 && dead > all/2 }
	dead := 0
	for _, c := range b.s.classList {
		if c.placed == 0 {
			dead++
		}
	}
	empty, all := 0, 0
	for i, nodes := range b.s.shapes.nodes {
		if b.s.shapes.tainted[int32(i+1)] {
			continue // a drain's shape, empty between rounds
		}
		all++
		if len(nodes) == 0 {
			empty++
		}
	}
	return mostly(dead, len(b.s.classList)) || mostly(empty, all)
}
