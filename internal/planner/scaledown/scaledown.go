// Package scaledown is the scale-down planner: which nodes berth can remove
// now, proven by simulation on the same snapshot and filters as scale-up.
// A node is removable when every pod that must move has a home on the
// other nodes (nodes removed in the same plan excluded, nodes being
// launched included), the headroom units that fit before still fit after,
// no drainability rule blocks it, and its group's minSize, consolidation
// policy and disruption budget allow it. Least-utilised nodes are tried
// first. Pure: values in, Plan out.
package scaledown

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Node-level reasons a node is not removable (pod-level ones are the
// drain rules' reasons).
const (
	ReasonNodeDoNotDisrupt drain.Reason = "NodeDoNotDisrupt"
	ReasonPolicy           drain.Reason = "ConsolidationPolicy"
	ReasonMinSize          drain.Reason = "MinSize"
	ReasonBudget           drain.Reason = "DisruptionBudget"
	ReasonNoHome           drain.Reason = "NoHome"
	ReasonHeadroom         drain.Reason = "Headroom"
	ReasonNotOwned         drain.Reason = "NotLaunchedByBerth"
	// ReasonNominated: a pod not bound yet is nominated to the node (by
	// berth, which launched the node for it, or by the scheduler): it is
	// on its way there, and the node is not empty however it looks.
	ReasonNominated drain.Reason = "PodNominated"
	// ReasonWorkloadClaim: the node's devices hold a ResourceClaim
	// reserved for a PodGroup that still exists; its pods may come back
	// at any time and expect the devices there.
	ReasonWorkloadClaim drain.Reason = "WorkloadResourceClaim"
	// ReasonRecentlyGivenUp: berth gave up the node's drain a moment ago;
	// it is not drained again before the cool-down ends.
	ReasonRecentlyGivenUp drain.Reason = "RecentlyGivenUp"
	// ReasonGroupHeld: berth is bringing capacity to the node group for a
	// pod that waits (a node launching for it, or a launch for it that
	// failed there); no removal starts in the group meanwhile.
	ReasonGroupHeld drain.Reason = "NodeGroupHeld"
	// ReasonReplacementHeld: one cheaper node would replace the node (and
	// others) but is not planned: pods that wait for a node could take
	// its room, or its node group is past its maxSize.
	ReasonReplacementHeld drain.Reason = "ReplacementHeld"
)

// Input is the cluster to plan a scale-down for.
type Input struct {
	NodeGroups []*v1alpha1.NodeGroup
	Nodes      []*corev1.Node
	// Pods are the pods bound to nodes.
	Pods []*corev1.Pod
	// Nominated are pods not bound yet whose status.nominatedNodeName
	// names a node: that node stays while they wait.
	Nominated []*corev1.Pod
	// Pending are pods that wait for a node and are not nominated to one.
	// Those that fit on a node that stays take their room there before
	// any removal is tried; those that fit nowhere are scale-up's matter
	// and hold no removal back (Plan.Unplaced lists them), but a
	// replacement is planned with them: none whose room they could take.
	Pending []*corev1.Pod
	// Held are the node groups where no removal starts now, with why
	// (berth is bringing capacity there for a pod that waits).
	Held map[string]string
	// Cooling are the nodes whose drain berth gave up recently, with why:
	// they are not candidates (and take no share of the budget). Cooling
	// reads them from the nodes.
	Cooling map[string]string
	// Since are the nodes counting down to their removal (Countdown):
	// they are tried first, the longest counting first.
	Since Countdown
	// Now is when the plan is made: pods terminating for longer than
	// their grace period go with their node and hold no room. Zero (an
	// offline plan) counts every pod.
	Now time.Time
	// LaunchGrace is how long after its creation (or its resume from
	// standby) a not-Ready node of berth's is still booting, and so a home
	// for pods: the max provision time. A node older than that and not
	// Ready is no home, nor is one that came up once (labelled
	// initialized) and is not Ready now. With Now zero every other such
	// node is booting.
	LaunchGrace time.Duration
	// Controllers are the UIDs of the workload controllers that exist
	// (ReplicaSets, Jobs, StatefulSets, ReplicationControllers,
	// DaemonSets): a pod whose controller is not among them keeps its
	// node. Nil when not known: the check is off.
	Controllers map[types.UID]bool
	PDBs        []*policyv1.PodDisruptionBudget
	Namespaces  []*corev1.Namespace
	Claims      []*corev1.PersistentVolumeClaim
	Volumes     []*corev1.PersistentVolume
	// DRA are the dynamic resource allocation objects, as in scale-up.
	DRA snapshot.DRA
	// Virtual are the Headroom units and CapacityBuffer chunks: those that
	// fit on the nodes before a removal must still fit after it.
	Virtual []*corev1.Pod
	// Limits as in scale-up (a replacement is planned within them).
	Limits scaleup.Limits
	// DaemonSets and Unavailable offerings, as in scale-up: a replacement
	// node is planned by the scale-up planner.
	DaemonSets  []*appsv1.DaemonSet
	Unavailable []scaleup.Offering
	// Base, as in scale-up: the model of the cluster kept from the
	// previous plan.
	Base *snapshot.Base
	// WhatIf is a second model of the cluster, kept for the what-if plans
	// of replacements and disruptions (the scale-up planner's plans of
	// the pods that would move, on the cluster without their nodes): the
	// plan holds Base's snapshot while it makes them. Nil: each what-if
	// builds its model anew.
	WhatIf *snapshot.Base
}

// AddPods sorts the cluster's pods into the input: pods on a node, pods
// not bound and nominated to one, and the pods that wait for a node
// (awaits says which: podutil.Burst's AwaitsNode, as the controller
// plans). The controller, `berth explain` and `berth plan` sort them
// alike.
func (in *Input) AddPods(pods []*corev1.Pod, awaits func(*corev1.Pod) bool) {
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "":
			in.Pods = append(in.Pods, p)
		case podutil.IsUnbound(p) && p.Status.NominatedNodeName != "":
			in.Nominated = append(in.Nominated, p)
		case awaits(p):
			in.Pending = append(in.Pending, p)
		}
	}
}

// RemovalReason says why a node is removed.
type RemovalReason string

// Why nodes are removed.
const (
	// RemovalEmpty: no pod of the node needs a new home.
	RemovalEmpty RemovalReason = "Empty"
	// RemovalUnderutilized: its pods fit on the other nodes.
	RemovalUnderutilized RemovalReason = "Underutilized"
	// RemovalNodeGroupDeleted: its NodeGroup is being deleted
	// (deletionPolicy Drain).
	RemovalNodeGroupDeleted RemovalReason = "NodeGroupDeleted"
)

// Removal is a node the plan removes.
type Removal struct {
	Node      string        `json:"node"`
	NodeGroup string        `json:"nodeGroup"`
	Reason    RemovalReason `json:"reason"`
	// Empty is true when no pod of the node needs a new home.
	Empty bool `json:"empty"`
	// Utilization is the larger of cpu and memory requests over allocatable.
	Utilization float64 `json:"utilization"`
	// Evict are the pods to evict, each with the node the plan found for it.
	Evict []Move `json:"evict,omitempty"`
}

// Move is a pod and the node it fits on after the removal.
type Move struct {
	Pod scaleup.PodRef `json:"pod"`
	To  string         `json:"to"`
}

// Blocked is a node that stays, and why.
type Blocked struct {
	Node      string          `json:"node"`
	NodeGroup string          `json:"nodeGroup"`
	Reason    drain.Reason    `json:"reason"`
	Pod       *scaleup.PodRef `json:"pod,omitempty"`
	Message   string          `json:"message"`
	// Waits says the node would be removable but is held back by
	// something other than its pods' room: its group's budget, minSize or
	// a hold, or a pod it waits to finish; its other pods have a home (or
	// it has none to move). Its countdown runs (Countdown).
	Waits bool `json:"waits,omitempty"`
}

// Plan is the outcome.
type Plan struct {
	Remove []Removal `json:"remove"`
	// Replace is at most one replacement: nodes whose pods all fit on the
	// other nodes plus one new, cheaper node.
	Replace []Replacement `json:"replace,omitempty"`
	Blocked []Blocked     `json:"blocked,omitempty"`
	// Unplaced are the pending pods that fit on no node that stays: no
	// removal waits for them (scale-up explains them on the pod).
	Unplaced []scaleup.PodRef `json:"unplaced,omitempty"`
	// Disruptions are the nodes whose life takes them out (interrupted,
	// drifted, expired, unhealthy), planned before any removal.
	Disruptions []Disruption `json:"disruptions,omitempty"`
}

// candidate is a node of a group that might go.
type candidate struct {
	node  *snapshot.Node
	group *v1alpha1.NodeGroup
	util  float64
	since time.Time // zero: not counting down (Input.Since)
	// headroom: the node runs a headroom placeholder or holds a unit
	// (tried last: holdsHeadroom).
	headroom bool
}

// Run computes the plan. Nodes carrying berth's disrupted taint are being
// drained already: they count against their group's budget and are no
// home for anyone; their pods, and the pods that wait for a node, take
// their room on the other nodes before any removal is tried.
func Run(in Input) (*Plan, error) {
	p, err := newPlanner(in)
	if err != nil {
		return nil, err
	}
	defer in.Base.Release(p.s)
	for _, n := range p.s.Nodes {
		if n.NodeGroup == "" || gone(n.Node, p.groups[n.NodeGroup]) {
			continue
		}
		p.size[n.NodeGroup]++
		if n.Node.Labels[v1alpha1.LabelInitialized] == "true" && !nodeutil.Standby(n.Node) {
			p.budgetBase[n.NodeGroup]++
		}
		// Being deleted (by anyone), draining, or its replacement is
		// launching. Only the group's own nodes count as its drains: a node
		// left tainted by a group deleted and created again under the same
		// name is not this group's disruption.
		g := p.groups[n.NodeGroup]
		switch {
		case n.DeletionTimestamp != nil:
			p.disrupting[n.NodeGroup]++
		case g != nil && n.Annotations[v1alpha1.AnnotationLaunchedBy] == string(g.UID) &&
			(nodeutil.Disrupted(n.Node) || n.Annotations[v1alpha1.AnnotationReplacedBy] != "" ||
				!in.Now.IsZero() && nodeutil.ReplacementLaunching(n.Node, in.Now, in.LaunchGrace)):
			p.disrupting[n.NodeGroup]++
		case n.Node.Labels[v1alpha1.LabelInitialized] == "true" && !nodeutil.Ready(n.Node) && !nodeutil.Standby(n.Node):
			p.notReady[n.NodeGroup]++ // a suspended standby node is not Ready by design
		}
		if by := n.Annotations[v1alpha1.AnnotationReplacedBy]; by != "" {
			p.replacements[by] = true
		}
	}
	p.holdNominated(in.Nominated)
	p.waiting = p.settle("", in.Pending)
	for _, pod := range p.waiting {
		p.plan.Unplaced = append(p.plan.Unplaced, scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name})
	}
	placeVirtual(p.s, p.groups, in.Virtual)
	if err := p.disruptions(in); err != nil {
		return nil, err
	}
	now, later := p.byWindow(p.candidates())
	if err := p.planRemovals(in, now, later); err != nil {
		return nil, err
	}
	return p.plan, nil
}

// planRemovals plans the removals due now (byCountdown), then a
// replacement of nodes that only lack room, then the removals still
// waiting for their consolidateAfter or their window: those take no
// room, budget or replacement from what can start now. A node planned
// removed, or a waiting node that could go on its own (a replacement
// would wait for it), is no node a replacement is for; a node the
// replacement takes is cordoned (no home for the waiting nodes' pods)
// and neither removed nor reported kept.
func (p *planner) planRemovals(in Input, now, later []candidate) error {
	due, waiting := p.byCountdown(now)
	for _, c := range due {
		p.consider(c)
	}
	out := map[*snapshot.Node]bool{}
	for _, r := range p.plan.Remove {
		out[p.s.Node(r.Node)] = true
	}
	for _, c := range waiting {
		if p.removableAlone(c) {
			out[c.node] = true
		}
	}
	if err := p.replace(in, slices.DeleteFunc(slices.Clone(now), func(c candidate) bool { return out[c.node] })); err != nil {
		return err
	}
	replaced := map[string]bool{}
	for _, r := range p.plan.Replace {
		for _, name := range r.Nodes {
			replaced[name] = true
			if n := p.s.Node(name); n != nil {
				p.s.Cordon(n)
			}
		}
	}
	p.plan.Blocked = slices.DeleteFunc(p.plan.Blocked, func(b Blocked) bool { return replaced[b.Node] })
	for _, c := range slices.Concat(waiting, later) {
		if !replaced[c.node.Name] {
			p.consider(c)
		}
	}
	p.sayBudgetHeld()
	return nil
}

// newPlanner builds the cluster snapshot and the planner's bookkeeping,
// with every node being drained or replaced cordoned: it is no home for
// anyone.
func newPlanner(in Input) (*planner, error) {
	s, err := scaleup.ClusterSnapshot(scaleup.Input{NodeGroups: in.NodeGroups, Nodes: in.Nodes, Pods: in.Pods,
		Namespaces: in.Namespaces, Claims: in.Claims, Volumes: in.Volumes, DRA: in.DRA, Limits: in.Limits, Base: in.Base,
		Now: in.Now, LaunchGrace: in.LaunchGrace, DaemonSets: in.DaemonSets})
	if err != nil {
		return nil, err
	}
	groups := map[string]*v1alpha1.NodeGroup{}
	for _, g := range in.NodeGroups {
		groups[g.Name] = g
	}
	p := &planner{s: s, plan: &Plan{}, groups: groups, held: in.Held, cooling: in.Cooling, since: in.Since, budgets: drain.NewBudgets(in.PDBs), rules: drain.Rules(),
		now: in.Now, controllers: in.Controllers,
		size: map[string]int{}, budgetBase: map[string]int{}, disrupting: map[string]int{}, removed: map[string]int{}, notReady: map[string]int{}, replacements: map[string]bool{},
		nominated: map[string]*corev1.Pod{}, settled: map[*corev1.Pod]bool{}, moved: map[scaleup.PodRef]moveAt{}}
	for _, pod := range in.Nominated {
		if node := pod.Status.NominatedNodeName; node != "" && pod.Spec.NodeName == "" && p.nominated[node] == nil {
			p.nominated[node] = pod
		}
	}
	for _, n := range s.Nodes {
		if n.NodeGroup != "" && n.DeletionTimestamp == nil && leaving(n.Node) {
			s.Cordon(n)
		}
	}
	return p, nil
}

// leaving reports whether berth is taking the node out: it drains it, or
// launched its replacement and drains it once that is Ready. Its pods are
// on their way elsewhere (the replacement was sized for them), and it is
// no home.
func leaving(n *corev1.Node) bool {
	return nodeutil.Disrupted(n) || n.Annotations[v1alpha1.AnnotationReplacedBy] != ""
}

type planner struct {
	s      *snapshot.Snapshot
	plan   *Plan
	groups map[string]*v1alpha1.NodeGroup
	// held are the node groups where no removal starts, with why;
	// cooling the nodes whose drain was given up recently.
	held, cooling map[string]string
	// since are the nodes counting down (Input.Since).
	since Countdown
	// now and controllers are the drain rules' context besides budgets.
	now         time.Time
	controllers map[types.UID]bool
	budgets     *drain.Budgets
	rules       []drain.Rule
	// size, disrupting, removed and notReady count nodes per group;
	// budgetBase the nodes a percentage budget is of: those up once (not
	// booting, as a replacement being launched is) and not suspended
	// standby nodes.
	size, budgetBase, disrupting, removed, notReady map[string]int
	// replacements are the nodes launched to replace others that are
	// still there: empty until the pods move, never a candidate then.
	replacements map[string]bool
	// nominated is, per node, a pod not bound yet that is nominated to it.
	nominated map[string]*corev1.Pod
	// homes are the nodes pods may move to (fullest first) and hint
	// where the last pod went.
	homes []*snapshot.Node
	hint  int
	// unbound caches, per pod, its copy without a node and that copy's
	// prepared class: a pod is simulated once per node tried.
	unbound map[*corev1.Pod]unboundPod
	// unboundOf caches, per class of bound pods, the class of their
	// copies without a node (pods without resource claims: their class
	// is then a function of the bound one's fingerprint, node aside), so
	// that the pods of a node are not fingerprinted again one by one.
	unboundOf map[*snapshot.Class]*snapshot.Class
	// settled are the pods placed by settle (waiting pods, pods of nodes
	// being drained): they need a home if their node goes, but are not
	// evicted from it.
	settled map[*corev1.Pod]bool
	// waiting are the pending pods that fit on no node (Plan.Unplaced);
	// fit, per node group, those of them that fit on its new nodes
	// without its maxSize and limits (fitIn, planned when a replacement
	// there needs it).
	waiting []*corev1.Pod
	fit     map[string]map[scaleup.PodRef]bool
	// moved are the moves of the plan's removals by pod, so that a pod
	// moved again, when the node it was moved to goes too, is said to
	// move where it ends.
	moved map[scaleup.PodRef]moveAt
	// budgetAside makes budgetAllows check minSize only, while the
	// replacement that only the budget holds back is looked for;
	// budgetHeld is that replacement (waitForBudget).
	budgetAside bool
	budgetHeld  *Replacement
}

type unboundPod struct {
	pod   *corev1.Pod
	class *snapshot.Class
}

// unboundClass returns the pod as its controller recreates it, to place
// in the snapshot, and its prepared class (nil if it cannot be
// classified). A pod without resource claims is placed as itself, marked
// Unbound (its class is its bound class's, node aside: found once per
// class, not fingerprinted pod by pod, and no copy is made); one with
// claims as a copy without its node and claim statuses (its controller's
// new pod gets new claims from the templates).
func (p *planner) unboundClass(sp *snapshot.Pod) (*snapshot.Pod, *snapshot.Class) {
	pod := sp.Pod
	if u, ok := p.unbound[pod]; ok {
		return &snapshot.Pod{Pod: u.pod, Class: u.class, Unbound: true}, u.class
	}
	byClass := sp.Class != nil && len(pod.Spec.ResourceClaims) == 0
	c, placed := p.unboundOf[sp.Class], pod
	if c == nil || !byClass {
		cp := unboundCopy(pod)
		var err error
		if c, err = p.s.Classify(cp); err != nil {
			return &snapshot.Pod{Pod: cp, Unbound: true}, nil
		}
		p.s.Prepare(c)
		if byClass {
			if p.unboundOf == nil {
				p.unboundOf = map[*snapshot.Class]*snapshot.Class{}
			}
			p.unboundOf[sp.Class] = c
		} else {
			placed = cp
		}
	}
	if p.unbound == nil {
		p.unbound = map[*corev1.Pod]unboundPod{}
	}
	p.unbound[pod] = unboundPod{pod: placed, class: c}
	return &snapshot.Pod{Pod: placed, Class: c, Unbound: true}, c
}

// unboundCopy is the pod as its controller makes it again: a shallow copy
// (nothing changes the shared slices) without a node and without claim
// statuses.
func unboundCopy(pod *corev1.Pod) *corev1.Pod {
	cp := *pod
	cp.Spec.NodeName = ""
	cp.Status.ResourceClaimStatuses = nil
	return &cp
}

// candidates are the nodes berth launched, that were Ready once and are
// Ready now, not being removed: least utilised first. Others of a group
// are reported as blocked with the reason.
func (p *planner) candidates() []candidate {
	var out []candidate
	for _, n := range p.s.Nodes {
		g := p.groups[n.NodeGroup]
		if g == nil || n.DeletionTimestamp != nil || nodeutil.Disrupted(n.Node) || nodeutil.Standby(n.Node) || n.Annotations[v1alpha1.AnnotationReplacedBy] != "" ||
			p.replacements[n.Name] || p.taken(n.Name) || g.DeletionTimestamp != nil && !retiring(g) {
			// Standby nodes are the standby controller's; the nodes of a
			// group deleted with deletionPolicy Orphan are the user's from
			// now (its finalizer orphans them).
			continue
		}
		switch {
		case n.Annotations[v1alpha1.AnnotationLaunchedBy] == "" || n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(g.UID):
			p.block(n, g, ReasonNotOwned, nil, "node "+n.Name+" was not launched by berth for this node group")
		case n.Node.Labels[v1alpha1.LabelInitialized] != "true" || !nodeutil.Ready(n.Node) && !retiring(g):
			continue // launching or unhealthy: not a scale-down matter, but in a group being deleted (its deletion waits for every node)
		case OptedOut(n.Node) != "":
			p.block(n, g, ReasonNodeDoNotDisrupt, nil, "node "+n.Name+" "+OptedOut(n.Node))
		case g.Spec.Disruption.Policy() == v1alpha1.ConsolidationNever && !retiring(g):
			continue
		case p.cooling[n.Name] != "":
			p.block(n, g, ReasonRecentlyGivenUp, nil, p.cooling[n.Name])
		case p.s.HeldForWorkload(n) != "":
			p.block(n, g, ReasonWorkloadClaim, nil, p.s.HeldForWorkload(n))
		case p.nominated[n.Name] != nil:
			pod := p.nominated[n.Name]
			ref := scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}
			p.block(n, g, ReasonNominated, &ref, "pod "+ref.String()+" is not bound yet and is nominated to node "+n.Name)
		default:
			out = append(out, candidate{node: n, group: g, util: candidateUtilization(n, p.now), since: p.since[n.Name], headroom: holdsHeadroom(n)})
		}
	}
	slices.SortFunc(out, func(a, b candidate) int {
		// A node holding headroom last: its removal leaves the headroom
		// unready until its placeholder runs again elsewhere.
		if a.headroom != b.headroom {
			if a.headroom {
				return 1
			}
			return -1
		}
		if az, bz := a.since.IsZero(), b.since.IsZero(); az != bz {
			if az {
				return 1 // counting first
			}
			return -1
		}
		if c := a.since.Compare(b.since); c != 0 {
			return c // the longest counting first
		}
		if c := cmp.Compare(a.util, b.util); c != 0 {
			return c
		}
		return cmp.Compare(a.node.Name, b.node.Name)
	})
	return out
}

// holdsHeadroom reports whether a node runs a headroom placeholder or
// holds a headroom unit.
func holdsHeadroom(n *snapshot.Node) bool {
	return slices.ContainsFunc(n.Pods, func(p *snapshot.Pod) bool {
		return p.Labels[v1alpha1.LabelHeadroomRole] != "" || p.Annotations[v1alpha1.AnnotationVirtual] != ""
	})
}

// consider tries to remove one candidate.
func (p *planner) consider(c candidate) {
	n, g := c.node, c.group
	// Cheapest first, and what the user can change first: the pods, the
	// policy, the group's size and budget; the simulation last.
	movers, evict, blocked := p.classify(n, g)
	if blocked == nil || blocked.Waits {
		// A node waiting for a pod to finish is held by its group's
		// rules too (its policy may keep it for its other pods).
		if r := p.refuse(c, len(evict) > 0); r != nil && (blocked == nil || !r.Waits) {
			blocked = r
		}
	}
	if blocked != nil {
		if blocked.Waits && len(movers) > 0 {
			blocked.Waits = p.wouldRehome(n, movers) // its count runs only while it is removable
		}
		p.plan.Blocked = append(p.plan.Blocked, *blocked)
		return
	}
	var moves, again []Move
	var homeless *snapshot.Pod
	var refused error
	_ = p.s.WithFork(func() (bool, error) {
		moves, again, homeless = p.rehome(n, movers)
		if homeless != nil {
			return false, nil
		}
		// The budgets decide before the moves are kept: a node that
		// stays keeps its pods, and its room, in the simulation.
		refused = p.budgets.Take(evict)
		return refused == nil, nil
	})
	if homeless != nil && !retiring(g) {
		reason, what := ReasonNoHome, "pod "
		if homeless.Annotations[v1alpha1.AnnotationVirtual] != "" || homeless.Labels[v1alpha1.LabelHeadroomRole] != "" {
			reason, what = ReasonHeadroom, "headroom unit "
		}
		ref := scaleup.PodRef{Namespace: homeless.Namespace, Name: homeless.Name}
		p.block(n, g, reason, &ref, what+ref.String()+" would fit on no other node")
		return
	}
	if homeless != nil {
		refused = p.budgets.Take(evict) // a deleted group's node goes, its pods wait
	}
	if refused != nil {
		p.block(n, g, drain.ReasonPDB, nil, refused.Error())
		return
	}
	p.moveOn(again)
	p.removed[g.Name]++
	r := Removal{Node: n.Name, NodeGroup: g.Name, Reason: removalReason(g, evict), Empty: len(evict) == 0, Utilization: c.util}
	if homeless != nil {
		// A deleted group's pods wait for a node of another group.
		for _, pod := range evict {
			r.Evict = append(r.Evict, Move{Pod: scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}})
		}
	}
	r.Evict = append(r.Evict, moves...)
	for i, m := range r.Evict {
		if m.To != "" {
			p.moved[m.Pod] = moveAt{removal: len(p.plan.Remove), move: i}
		}
	}
	p.plan.Remove = append(p.plan.Remove, r)
}

// removableAlone reports whether a candidate's pods pass the drain rules
// and would all find a home if it went now (its group's rules aside).
func (p *planner) removableAlone(c candidate) bool {
	movers, _, blocked := p.classify(c.node, c.group)
	return blocked == nil && (len(movers) == 0 || p.wouldRehome(c.node, movers))
}

// wouldRehome reports whether the movers of node n would all find a home
// if n went now: a simulation the snapshot forgets.
func (p *planner) wouldRehome(n *snapshot.Node, movers []*snapshot.Pod) bool {
	ok := false
	_ = p.s.WithFork(func() (bool, error) {
		_, _, homeless := p.rehome(n, movers)
		ok = homeless == nil
		return false, nil
	})
	return ok
}

// moveAt is where a pod's move is in the plan: Remove[removal].Evict[move].
type moveAt struct{ removal, move int }

// moveOn records that pods an earlier removal moved have moved on (the
// node they went to goes too): that removal's moves say where they end.
func (p *planner) moveOn(again []Move) {
	for _, m := range again {
		if at, ok := p.moved[m.Pod]; ok {
			p.plan.Remove[at.removal].Evict[at.move].To = m.To
		}
	}
}

// refuse checks, before any simulation, what the group allows: its
// consolidation policy, minSize, budget and holds. A group being deleted
// keeps only its budget (its nodes are going, at its pace, one at a time
// at least).
func (p *planner) refuse(c candidate, evicts bool) *Blocked {
	n, g := c.node, c.group
	name := g.Name
	blocked := func(reason drain.Reason, msg string) *Blocked {
		return &Blocked{Node: n.Name, NodeGroup: name, Reason: reason, Message: msg, Waits: reason != ReasonPolicy}
	}
	reason := v1alpha1.ReasonUnderutilized
	if !evicts {
		reason = v1alpha1.ReasonEmpty
	}
	overBudget := p.inFlight(g, reason) >= p.allowed(g, reason)
	switch {
	case retiring(g) && !overBudget:
		return nil
	case evicts && !retiring(g) && g.Spec.Disruption.Policy() == v1alpha1.ConsolidationWhenEmpty:
		return blocked(ReasonPolicy, "node "+n.Name+" is not empty and node group "+name+" removes only empty nodes")
	case !retiring(g) && p.staying(name) <= int(g.Spec.MinSize):
		return blocked(ReasonMinSize, "node group "+name+" is at its minSize")
	case overBudget:
		return blocked(ReasonBudget, "node group "+name+" disrupts as many nodes as its budget allows"+p.downNote(g, reason))
	}
	if why, ok := p.held[name]; ok {
		return blocked(ReasonGroupHeld, "node group "+name+" holds its removals: "+why)
	}
	return nil
}

// staying is how many of the group's nodes stay: neither disrupted
// already nor taken out by this plan.
func (p *planner) staying(group string) int {
	return p.size[group] - p.disrupting[group] - p.removed[group]
}

// active are the groups not being deleted: those a replacement may be
// launched in (a node of a group being deleted would be drained again).
func active(groups []*v1alpha1.NodeGroup) []*v1alpha1.NodeGroup {
	out := make([]*v1alpha1.NodeGroup, 0, len(groups))
	for _, g := range groups {
		if g.DeletionTimestamp == nil {
			out = append(out, g)
		}
	}
	return out
}

// retiring reports whether the group is being deleted and its nodes are to
// be drained and removed (deletionPolicy Drain).
func retiring(g *v1alpha1.NodeGroup) bool {
	return g.DeletionTimestamp != nil && g.Spec.DeletionPolicy != v1alpha1.DeletionOrphan
}

// removalReason says why a node goes.
func removalReason(g *v1alpha1.NodeGroup, evict []*corev1.Pod) RemovalReason {
	switch {
	case retiring(g):
		return RemovalNodeGroupDeleted
	case len(evict) == 0:
		return RemovalEmpty
	}
	return RemovalUnderutilized
}

func (p *planner) block(n *snapshot.Node, g *v1alpha1.NodeGroup, reason drain.Reason, pod *scaleup.PodRef, msg string) {
	p.plan.Blocked = append(p.plan.Blocked, Blocked{Node: n.Name, NodeGroup: g.Name, Reason: reason, Pod: pod, Message: msg})
}

// gone reports whether a node of group g is as good as gone, and counts
// neither in the group's size nor in its budget (as Karpenter counts
// neither a node that never came up nor one whose instance is
// terminating): being deleted before it ever came up (a failed boot the
// launch timeout deletes), or drained and its removal accepted by the
// provider (berth.dev/removal-accepted on a node berth launched and
// drains): its pods are gone, only its Node object lingers. Counted, it
// held a group's one-node budget until the cloud deleted the Node
// (minutes with Cluster API).
func gone(n *corev1.Node, g *v1alpha1.NodeGroup) bool {
	if n.DeletionTimestamp != nil && n.Labels[v1alpha1.LabelInitialized] != "true" {
		return true
	}
	return g != nil && n.Annotations[v1alpha1.AnnotationLaunchedBy] == string(g.UID) && nodeutil.Disrupted(n) &&
		n.Annotations[v1alpha1.AnnotationRemovalAccepted] != ""
}

// placedByPlan reports whether the pod is one the plan placed, not a
// real pod to evict: a headroom unit or a pod settle placed. It needs a
// home when its node goes, and is evicted from no node.
func (p *planner) placedByPlan(sp *snapshot.Pod) bool {
	return sp.Annotations[v1alpha1.AnnotationVirtual] != "" || p.settled[sp.Pod]
}

// taken reports whether a lifecycle disruption of this plan takes the node.
func (p *planner) taken(node string) bool {
	for _, d := range p.plan.Disruptions {
		if d.Node == node {
			return true
		}
	}
	return false
}

// AnnotationClusterAutoscalerScaleDownDisabled is Cluster Autoscaler's
// node opt-out, which berth honours so that users can switch without
// marking their nodes again.
const AnnotationClusterAutoscalerScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

// DisruptedTaint is the taint berth puts on a node it drains, before it
// evicts a pod: no new pod lands there (but one that tolerates it), and a
// topology spread whose nodeTaintsPolicy is Honor stops counting the
// node as a domain. A removal is simulated with it.
func DisruptedTaint() corev1.Taint {
	return corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule}
}

// NodeOptOutAnnotations are the node annotations that, set to "true",
// keep a node out of berth's voluntary disruptions (OptedOut): berth's
// own, Karpenter's and Cluster Autoscaler's.
func NodeOptOutAnnotations() []string {
	return []string{v1alpha1.AnnotationDoNotDisrupt, drain.AnnotationKarpenterDoNotDisrupt, AnnotationClusterAutoscalerScaleDownDisabled}
}

// OptedOut says how the node's owner asked berth to leave it alone, or ""
// when they did not: no consolidation, drift, expiry or repair takes it
// (an interruption does: the cloud takes the node anyway). berth's own
// annotation and label count, and Karpenter's and Cluster Autoscaler's
// node annotations.
func OptedOut(n *corev1.Node) string {
	for _, key := range NodeOptOutAnnotations() {
		if n.Annotations[key] == "true" {
			return "is annotated " + key + ": \"true\""
		}
	}
	if n.Labels[v1alpha1.LabelScaleDownDisabled] == "true" {
		return "is labelled " + v1alpha1.LabelScaleDownDisabled + ": \"true\""
	}
	return ""
}

// GiveUpCooldown is how long a node whose drain was given up is not
// drained again: what stopped it (a budget, a pod that blocks) rarely goes
// away at once.
const GiveUpCooldown = 5 * time.Minute

// Cooling are the nodes whose drain berth gave up within GiveUpCooldown
// before now, as their berth.dev/drain-given-up says, with why (for
// Input.Cooling). A time that cannot be read, or lies in the future by
// more than the cool-down (a clock set wrong), cools nothing.
func Cooling(nodes []*corev1.Node, now time.Time) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		v := n.Annotations[v1alpha1.AnnotationDrainGivenUp]
		if v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, v)
		if err != nil || now.Sub(at) > GiveUpCooldown || at.Sub(now) > GiveUpCooldown {
			continue
		}
		out[n.Name] = CoolingMessage(n.Name, at)
	}
	return out
}

// CoolingMessage says that berth gave up draining node name at at.
func CoolingMessage(name string, at time.Time) string {
	return fmt.Sprintf("berth gave up draining node %s at %s; it is not drained again for %s", name, at.UTC().Format(time.RFC3339), GiveUpCooldown)
}
