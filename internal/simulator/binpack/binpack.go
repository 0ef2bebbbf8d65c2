// Package binpack places pending pods: on existing nodes (launching ones
// included) first, then on nodes planned earlier in the same round, then on
// new nodes opened from node group templates. A new node keeps every
// instance type and capacity type it could still be launched as; each pod
// added narrows that set, and the cheapest remaining option is chosen when
// packing ends, so the price is decided per node, not per pod.
package binpack

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Template is a node group in one zone: the node it would launch, with its
// options (instance type x capacity type) in that zone.
type Template struct {
	// Node is a hypothetical node carrying the labels and taints every node
	// of the template gets; its Flex lists all options.
	Node *snapshot.Node
	// Group is the node group name; Weight its weight.
	Group  string
	Weight int32
	// Zone of the template.
	Zone string
}

// Launcher tells which options of a template may still be launched given
// what the snapshot already holds (node group size and resource limits,
// cluster limits).
type Launcher interface {
	// Allowed returns the launchable options of t, or a reason why none is.
	// The slice may be the template's own: callers never modify it.
	Allowed(s *snapshot.Snapshot, t *Template) ([]*snapshot.Option, string)
}

// InstallTemplates makes the templates the snapshot's new-node candidates
// and disables, up front, those the launcher refuses entirely (a group at
// its maxSize, every offering unavailable), so that filters never try
// them. Every packing problem is prepared this way: scale-up, `berth
// plan` and the tests build the same model.
func InstallTemplates(s *snapshot.Snapshot, templates []*Template, l Launcher) {
	nodes := make([]*snapshot.Node, len(templates))
	for i, t := range templates {
		nodes[i] = t.Node
	}
	s.SetTemplates(nodes)
	for _, t := range templates {
		if opts, _ := l.Allowed(s, t); len(opts) == 0 {
			s.DisableTemplate(t.Node)
		}
	}
}

// Input is one packing problem.
type Input struct {
	Snapshot  *snapshot.Snapshot
	Pending   []*corev1.Pod
	Templates []*Template
	Launcher  Launcher
	Filters   []predicates.Filter
	// NamePrefix names planned nodes: <prefix><n>.
	NamePrefix string
	// Initial are nodes to open before any pod is placed (to bring node
	// groups up to their minimum size), one per entry.
	Initial []*Template
	// Nominated maps pods to the node they are expected
	// on; such a pod is placed there first when it fits, as kube-scheduler
	// does with a nominated node.
	Nominated map[types.NamespacedName]string
}

// Placement is a pod and the node it goes to.
type Placement struct {
	Pod  *corev1.Pod
	Node *snapshot.Node
}

// Result is the outcome of packing.
type Result struct {
	// Placements of pods, on existing and on new nodes, in packing order.
	Placements []Placement
	// NewNodes are the planned nodes, each with its chosen option.
	NewNodes []*NewNode
	// Unplaced are the pods that fit nowhere, with their classes.
	Unplaced []*snapshot.Pod
	// Invalid are pending pods the simulator cannot read (e.g. a malformed
	// label selector); they are skipped, not fatal for the others.
	Invalid []InvalidPod
}

// InvalidPod is a pending pod that could not be classified, and why.
type InvalidPod struct {
	Pod *corev1.Pod
	Err error
}

// NewNode is a planned node and the option chosen for it.
type NewNode struct {
	Node     *snapshot.Node
	Template *Template
	Option   *snapshot.Option
	Pods     []*corev1.Pod
	// Initial is true for nodes opened from Input.Initial.
	Initial bool
}

// packer holds the state of one Pack call.
type packer struct {
	in  Input
	s   *snapshot.Snapshot
	res Result
	// unusable[class] marks nodes (by index in s.Nodes) where the class failed
	// for a reason that cannot go away while pods are only added; cursor is
	// the first index not known unusable.
	unusable map[int]nodeSet
	cursor   map[int]int
	byNode   map[*snapshot.Node]*NewNode
	// opened counts the nodes planned from each template this round:
	// equally cheap and preferred templates take turns (preferredTemplate).
	opened map[*Template]int
	// oneWeight: every planned node's group has the same weight while
	// fill, stepDown and balance run (they open no node), so their moves
	// and trades need not look weights up pair by pair (improve sets it).
	oneWeight bool
	seq       int
	// rates caches newNodeRate per class; fits what fitCost computes per
	// template and requests.
	rates map[int]float64
	fits  map[fitKey]fitResult
	// pending are the pods being placed.
	pending []*snapshot.Pod
	// trial is set on the packers bestOrder compares orders with: they
	// skip the exact search, which the chosen order's packing then runs.
	trial bool
	// static are, per class, the node shapes (snapshot.Node.Shape) where
	// the class failed a static filter: no node of such a shape is
	// evaluated again. They hold while pods come and go, and are shared
	// with the trial packers of bestOrder.
	static shapeFailures
	// rooms: the filters check resources (NodeResourcesFit), so a scan
	// may pass over blocks of nodes without room (Snapshot.RoomFrom).
	rooms bool
	// hard are the classes of the pending pods with hardSpreads;
	// deadAfterGreedy those of them the greedy pass left with nowhere to
	// put one more pod (deadend.go).
	hard            []*snapshot.Class
	deadAfterGreedy map[*snapshot.Class]bool
	// passed are the planned nodes placeAhead passes over for the pod it
	// places (scanNodes skips them); noAhead turns placeAhead off.
	passed  nodeSet
	noAhead bool
	// passedOver: placeAhead passed over a node or template this run.
	passedOver bool
	// fitAt is the index of the node scanNodes last found a fit on.
	fitAt int
}

// Pack places the pending pods. The snapshot is changed: placed pods and
// planned nodes are added to it.
func Pack(in Input) (*Result, error) {
	var (
		pods    = make([]*snapshot.Pod, 0, len(in.Pending))
		invalid []InvalidPod
	)
	for _, pod := range in.Pending {
		c, err := in.Snapshot.Classify(pod)
		if err != nil {
			invalid = append(invalid, InvalidPod{Pod: pod, Err: err})
			continue
		}
		in.Snapshot.Prepare(c)
		pods = append(pods, &snapshot.Pod{Pod: pod, Class: c})
	}
	static := shapeFailures{}
	order := bestOrder(in, pods, static)
	p := pack(in, pods, order, static)
	p.res.Invalid = invalid
	return &p.res, nil
}

func newPacker(in Input, static shapeFailures) *packer {
	return &packer{in: in, s: in.Snapshot, unusable: map[int]nodeSet{}, cursor: map[int]int{}, static: static,
		byNode: map[*snapshot.Node]*NewNode{}, opened: map[*Template]int{}, rates: map[int]float64{}, fits: map[fitKey]fitResult{},
		rooms: slices.ContainsFunc(in.Filters, func(f predicates.Filter) bool { _, ok := f.(predicates.NodeResourcesFit); return ok })}
}

// run packs the pods, taken in the given order, then improves the plan.
func (p *packer) run(pods []*snapshot.Pod, order podOrder) {
	for _, t := range p.in.Initial {
		if opts, _ := p.in.Launcher.Allowed(p.s, t); len(opts) > 0 && p.s.TemplateAvailable(t.Node) {
			p.open(t, opts).Initial = true
		}
	}
	p.pending = pods
	p.hard = hardClasses(pods)
	pods = p.placeNominated(slices.Clone(pods))
	sortPods(p.s, pods, order)
	for len(pods) > 0 {
		next := pods[:0:0]
		for _, pod := range pods {
			if !p.place(pod) {
				next = append(next, pod)
			}
		}
		if len(next) == len(pods) {
			break // no progress: what is left fits nowhere
		}
		pods = next
	}
	p.res.Unplaced = pods
	p.deadAfterGreedy = p.deadEnded()
	p.improve()
	p.finish()
}

// placeNominated places pods on their nominated nodes where they fit and
// returns the others.
func (p *packer) placeNominated(pods []*snapshot.Pod) []*snapshot.Pod {
	if len(p.in.Nominated) == 0 {
		return pods
	}
	rest := pods[:0:0]
	for _, pod := range pods {
		n := p.s.Node(p.in.Nominated[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}])
		if n != nil && !predicates.Run(p.in.Filters, p.s, pod.Class, n).Failed() {
			p.add(pod, n)
			continue
		}
		rest = append(rest, pod)
	}
	return rest
}

// growLookahead bounds how many nodes past the first one that would have
// to grow are tried for free room, so that a round stays linear in pods.
const growLookahead = 4096

// place puts one pod, in this order: on the first existing or planned
// node where it fits as is (scanNodes), on a planned node grown to a
// bigger instance type when that costs no more than a new node, or on a
// new node (addToNewNode); a pod with two spreads or more passes over
// those that would leave the next pod of its class nowhere (placeAhead).
func (p *packer) place(pod *snapshot.Pod) bool {
	if hardSpreads(pod.Class) && !p.noAhead {
		return p.placeAhead(pod)
	}
	return p.placeFirst(pod)
}

// placeFirst is place without looking ahead.
func (p *packer) placeFirst(pod *snapshot.Pod) bool {
	fit, grow := p.scanNodes(pod.Class)
	switch {
	case fit != nil:
		p.add(pod, fit)
		return true
	case grow != nil && p.growthRate(grow, pod.Class) <= p.newNodeRate(pod.Class):
		p.add(pod, grow)
		return true
	}
	return p.addToNewNode(pod, grow)
}

// addToNewNode opens a node from the best template for the pod; without
// one, it grows the planned node grow if there is one.
func (p *packer) addToNewNode(pod *snapshot.Pod, grow *snapshot.Node) bool {
	t, opts := p.chooseTemplate(pod.Class)
	if t == nil {
		if grow != nil {
			p.add(pod, grow)
			return true
		}
		return false
	}
	p.add(pod, p.open(t, opts).Node)
	return true
}

// scanNodes looks at the nodes in order (existing before planned) from the
// class's cursor and returns the first where a pod of the class fits as
// is, an existing node that is up before one that waits (Node.Waits:
// kube-scheduler binds the pod to the one that is up, and the room of the
// one that waits stays for pods that need it); or nil and grow, the first
// planned node that fits only by moving to a bigger (dearer) instance
// type. After finding grow the scan goes on for
// growLookahead nodes, for one whose current type has room (which costs
// the plan nothing). Nodes a pod of the class can never use are recorded
// in the class's unusable set, and the cursor skips the leading ones;
// topology domains found too full are skipped for the rest of the scan;
// blocks of nodes none of which has the room a pod of the class needs are
// passed over (they would fail NodeResourcesFit), which leaves the nodes
// found as they are.
func (p *packer) scanNodes(c *snapshot.Class) (fit, grow *snapshot.Node) {
	unusable, cursor := p.unusable[c.ID], p.cursor[c.ID]
	defer func() { p.unusable[c.ID], p.cursor[c.ID] = unusable, cursor }()
	static := p.static[c.ID]
	advancing := true
	var full []predicates.Domain
	lookahead := 0
	waits := -1 // the first node that fits and waits
nodes:
	for i := cursor; i < len(p.s.Nodes); i++ {
		if waits >= 0 && p.s.Nodes[i].Planned {
			break // no existing node that is up fits
		}
		if grow != nil {
			if lookahead == 0 {
				break
			}
			lookahead--
		} else if i%snapshot.RoomBlock == 0 {
			if shapes := p.s.BlockShapes(i); shapes != nil && static.hasAll(shapes) {
				// The class failed every shape of the block for good.
				if advancing {
					cursor = i + snapshot.RoomBlock
				}
				i += snapshot.RoomBlock - 1
				continue
			}
			if p.rooms {
				if next := p.s.RoomFrom(i, &c.Base); next > i {
					advancing = false // the cursor passes only nodes known unusable
					i = next - 1
					continue
				}
			}
		}
		n := p.s.Nodes[i]
		if n.Shape != 0 && static.has(int(n.Shape)) {
			unusable = unusable.mark(i) // the class failed a node of this shape for good
		}
		if unusable.has(i) {
			if advancing {
				cursor = i + 1
			}
			continue
		}
		if n.Planned && n.Unschedulable {
			continue // dropped from the plan by improve
		}
		if p.passed.has(i) {
			advancing = false // passed over for one pod only (placeAhead)
			continue
		}
		if grow != nil && n.Flex != nil && !p.fitsCurrent(n, c) {
			continue // looking for free room only
		}
		for _, d := range full {
			if v, ok := n.Labels()[d.Key]; ok && v == d.Value {
				advancing = false
				continue nodes
			}
		}
		st := predicates.Run(p.in.Filters, p.s, c, n)
		if !st.Failed() {
			if n.Flex != nil && !p.fitsCurrent(n, c) {
				if grow == nil {
					grow, lookahead = n, growLookahead
				}
				continue
			}
			if n.Waits && !n.Planned {
				if waits < 0 {
					waits, advancing = i, false
				}
				continue
			}
			p.fitAt = i
			return n, nil
		}
		if st.Static && n.Shape != 0 && !c.NamesNodes {
			static = static.mark(int(n.Shape))
			p.static[c.ID] = static
		}
		switch {
		case st.Code == predicates.Unresolvable:
			unusable = unusable.mark(i)
			if advancing {
				cursor = i + 1
			}
		case st.Domain.Key != "" && st.Domain.Key != corev1.LabelHostname:
			full = append(full, st.Domain)
			advancing = false
		default:
			advancing = false
		}
	}
	if waits >= 0 {
		p.fitAt = waits
		return p.s.Nodes[waits], nil
	}
	return nil, grow
}

// nodeSet is a set of node indexes, one bit each: a class's nodes that no
// pod of it can ever use (a filter said Unresolvable). The same bits serve
// as a set of shape IDs (shapeFailures).
type nodeSet []uint64

// shapeFailures are, per class ID, the node shapes the class failed a
// static filter on.
type shapeFailures map[int]nodeSet

func (s nodeSet) has(i int) bool { return i/64 < len(s) && s[i/64]&(1<<(i%64)) != 0 }

// hasAll reports whether the set holds every one of the shape IDs.
func (s nodeSet) hasAll(ids []int32) bool {
	for _, id := range ids {
		if !s.has(int(id)) {
			return false
		}
	}
	return true
}

func (s nodeSet) mark(i int) nodeSet {
	for len(s) <= i/64 {
		s = append(s, 0)
	}
	s[i/64] |= 1 << (i % 64)
	return s
}

// truncate removes the nodes at index n and beyond.
func (s nodeSet) truncate(n int) nodeSet {
	if w := n / 64; w < len(s) {
		s[w] &= 1<<(n%64) - 1
		clear(s[w+1:])
	}
	return s
}

func (p *packer) add(pod *snapshot.Pod, n *snapshot.Node) {
	p.s.AddPod(pod, n)
	p.res.Placements = append(p.res.Placements, Placement{Pod: pod.Pod, Node: n})
	if nn := p.byNode[n]; nn != nil {
		nn.Pods = append(nn.Pods, pod.Pod)
	}
}

// open adds a planned node of template t with the given options.
func (p *packer) open(t *Template, opts []*snapshot.Option) *NewNode {
	n := p.plannedNode(t, opts, 1)
	p.seq++
	p.s.AddNode(n)
	nn := &NewNode{Node: n, Template: t}
	p.opened[t]++
	p.byNode[n] = nn
	p.res.NewNodes = append(p.res.NewNodes, nn)
	p.refreshTemplates()
	return nn
}

// refreshTemplates disables the templates that cannot launch more nodes,
// so that they stop counting as potential spread domains, and enables
// again those that can (a planned node left the plan). Every group's:
// a node planned or retired in one group moves the cluster-wide limits
// (--max-nodes-total, --cluster-max-*) that every group launches within.
// A spread's minimum may rise when a template goes, so that a node found
// too full becomes usable again: what scanNodes learnt is forgotten.
func (p *packer) refreshTemplates() {
	for _, t := range p.in.Templates {
		opts, _ := p.in.Launcher.Allowed(p.s, t)
		switch on := p.s.TemplateAvailable(t.Node); {
		case on && len(opts) == 0:
			p.s.DisableTemplate(t.Node)
			p.podsRemoved()
		case !on && len(opts) > 0:
			p.s.EnableTemplate(t.Node)
		}
	}
}

// retire drops an emptied planned node from the plan; its group may
// launch again.
func (p *packer) retire(n *snapshot.Node) {
	p.s.Retire(n)
	p.refreshTemplates()
}

// finish chooses the cheapest remaining option of every planned node (the
// one its pods prefer among equally cheap ones), each within the limits
// the nodes chosen before it leave (snapshot.LaunchAs).
func (p *packer) finish() {
	for _, nn := range p.res.NewNodes {
		nn.Option = p.preferredOption(nn.Node)
		p.s.LaunchAs(nn.Node, nn.Option)
	}
}
