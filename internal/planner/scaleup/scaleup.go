// Package scaleup decides which nodes to launch for pending pods: it builds
// node group templates (labels, taints, instance types, offerings,
// DaemonSet overhead), lets the simulator pack the pods on existing,
// planned and new nodes within size and resource limits, and explains every
// pod that fits nowhere. It is pure: values in, a Plan out.
package scaleup

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/simulator/binpack"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Input is everything a scale-up decision reads.
type Input struct {
	NodeGroups []*v1alpha1.NodeGroup
	Nodes      []*corev1.Node
	// Pods bound to nodes (their requests use the nodes).
	Pods []*corev1.Pod
	// Pending are the pods to place.
	Pending    []*corev1.Pod
	DaemonSets []*appsv1.DaemonSet
	Namespaces []*corev1.Namespace
	Claims     []*corev1.PersistentVolumeClaim
	Volumes    []*corev1.PersistentVolume
	// DRA are the dynamic resource allocation objects (device classes,
	// resource claims and templates, slices, PodGroups).
	DRA snapshot.DRA
	// Limits cap the total capacity of all nodes and their number.
	Limits Limits
	// Unavailable offerings are not launched (e.g. they just failed with
	// insufficient capacity).
	Unavailable []Offering
	// Nominated maps pending pods to the node they are
	// expected to run on (one being launched for them): they are placed
	// there first when they fit.
	Nominated map[types.NamespacedName]string
	// Now and LaunchGrace tell which not-Ready nodes are still booting:
	// those younger than LaunchGrace (DefaultLaunchGrace is the
	// controller's default) that have not come up once (labelled
	// initialized, not resumed since). Zero Now, or a node without a
	// creation time (a hand-written one), treats a not-Ready node of a
	// node group not labelled initialized as booting.
	Now         time.Time
	LaunchGrace time.Duration
	// Base, when set, is the model of the cluster kept from the previous
	// round (snapshot.Base): the round brings it up to date with Nodes
	// and Pods instead of building it anew. Its caller keeps
	// snapshot.Base's rule (objects are the informer cache's, never
	// changed in place) and plans one round at a time.
	Base *snapshot.Base
	// Changes are the pods that changed since the last round, for Base
	// (snapshot.Input.Changes).
	Changes *snapshot.PodChanges
	// Held are pending pods planned as bound for this round only (a pod
	// nominated to a node, as if bound to it): placed like Pods, never
	// kept in Base.
	Held []*corev1.Pod
	// Options, when set, keeps the node groups' options from round to
	// round (see Options); its caller plans one round at a time.
	Options *Options

	// seen is what the groups' nodes were seen with (observe), once a
	// round has read it.
	seen *observed
	// replaced is the room the nodes being replaced hold on their
	// replacements (newReplacedRoom): a provisioning round's only.
	replaced *replacedRoom
}

// Plan is a scale-up decision.
type Plan struct {
	// NewNodes to launch.
	NewNodes []NewNode `json:"newNodes"`
	// ExistingNodePlacements are pending pods that fit on nodes that exist
	// (or are being launched) and need no new node.
	ExistingNodePlacements []Placement `json:"existingNodePlacements"`
	// Unschedulable pods fit no existing node and no node group, with the
	// reason per node group.
	Unschedulable []Unschedulable `json:"unschedulable"`
	// PricePerHour is the total price of the new nodes.
	PricePerHour float64 `json:"pricePerHour"`
}

// NewNode is one node to launch.
type NewNode struct {
	// Name is the node's name within the plan (not the name it will get).
	Name         string  `json:"name"`
	NodeGroup    string  `json:"nodeGroup"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
	// Reason is "pending pods" or "minSize".
	Reason string   `json:"reason"`
	Pods   []PodRef `json:"pods"`
}

// Offering returns the offering the node is launched from.
func (n NewNode) Offering() Offering {
	return Offering{NodeGroup: n.NodeGroup, InstanceType: n.InstanceType, Zone: n.Zone, CapacityType: n.CapacityType}
}

// PodRef names a pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// Key is the pod's key in maps of pods.
func (p PodRef) Key() types.NamespacedName { return types.NamespacedName(p) }

// Placement is a pending pod that fits an existing node.
type Placement struct {
	Pod  PodRef `json:"pod"`
	Node string `json:"node"`
}

// Unschedulable is a pod that fits nowhere.
type Unschedulable struct {
	Pod     PodRef `json:"pod"`
	Message string `json:"message"`
}

// Reasons for new nodes.
const (
	ReasonPendingPods = "pending pods"
	ReasonMinSize     = "minSize"
)

func ref(p *corev1.Pod) PodRef { return PodRef{Namespace: p.Namespace, Name: p.Name} }

// Run computes the plan.
func Run(in Input) (*Plan, error) {
	groups := slices.Clone(in.NodeGroups)
	slices.SortFunc(groups, func(a, b *v1alpha1.NodeGroup) int { return cmp.Compare(a.Name, b.Name) })
	if len(in.Pending) == 0 && !belowMinSize(in.Nodes, groups) {
		// Nothing to place and no group to fill: the plan is empty
		// whatever the cluster holds, so the round does not model it
		// (a group or pod the model would refuse is reported by the
		// first round that has a pod to place). Its changes are read
		// with the next round's.
		in.Base.Postpone(in.Changes)
		return &Plan{ExistingNodePlacements: []Placement{}, Unschedulable: []Unschedulable{}, NewNodes: []NewNode{}}, nil
	}
	unavailable := map[Offering]bool{}
	for _, o := range in.Unavailable {
		unavailable[o] = true
	}
	in.seen = observe(in.Nodes, groups)
	in.replaced = newReplacedRoom(in) // scale-up's only: scale-down moves the pods itself
	s, err := ClusterSnapshot(in)
	if err != nil {
		return nil, err
	}
	defer in.Base.Release(s)
	in.seen.readPerNodePods(s)
	// The bound pods' terms are read from their classes: far fewer than
	// the pods on a large cluster.
	templates, err := buildTemplates(groups, in.DaemonSets, unavailable, in.seen, topologyOptionKeys(in.Pending, placedExamples(s)),
		wantedPorts(in.Pending), in.Options)
	if err != nil {
		return nil, err
	}
	bound := in.Pods
	if len(in.Held) > 0 {
		bound = slices.Concat(in.Pods, in.Held)
	}
	fold := foldFollowers(in.Pending, bound, func() snapshot.Volumes { return snapshot.NewVolumes(in.Claims, in.Volumes) },
		func(p *corev1.Pod) bool { return placeableAnywhere(s, groups, p) })
	s.SetAddOnPods(fold.pods)
	bin := binpack.Input{
		Snapshot: s, Pending: fold.pending, Templates: templates,
		Launcher: newLauncher(groups, in.Limits.Nodes, s), Filters: predicates.Default(),
		NamePrefix: "new-", Initial: minSizeNodes(s, groups, templates), Nominated: in.Nominated,
	}
	markWanted(s, templates, fold.pending, fold.pods)
	binpack.InstallTemplates(s, templates, bin.Launcher)
	res, err := binpack.Pack(bin)
	if err != nil {
		return nil, err
	}
	plan := buildPlan(bin, res, withoutTemplates(groups, templates))
	placeFollowers(plan, fold.of)
	return plan, nil
}

// ClusterSnapshot builds the snapshot of the cluster as it is: its nodes
// (launching ones included, their transient taints ignored as scale-up
// does) and bound pods, with the cluster and group limits, and no node
// group templates. Scale-down simulates removals on it, so that "does this
// pod fit there" is answered by the same model as scale-up. With in.Base
// set the snapshot is the base's, handed back with in.Base.Release.
func ClusterSnapshot(in Input) (*snapshot.Snapshot, error) {
	groups := slices.Clone(in.NodeGroups)
	slices.SortFunc(groups, func(a, b *v1alpha1.NodeGroup) int { return cmp.Compare(a.Name, b.Name) })
	s, err := newSnapshot(in, groups, in.booting)
	if err != nil {
		return nil, err
	}
	limits := in.Limits.Resources
	if limits == nil {
		limits = DefaultClusterLimits
	}
	s.SetClusterLimits(limits)
	for _, g := range groups {
		s.SetLimits(g.Name, g.Spec.Limits)
	}
	return s, nil
}

// DefaultLaunchGrace is how long a launched node may take to become
// Ready: the controller's default max provision time.
const DefaultLaunchGrace = 15 * time.Minute

// booting reports whether a node is still coming up: it was created, or
// resumed from standby, less than LaunchGrace ago. A node whose age is
// not known (Now zero, or a hand-written node without a creation time) is
// booting until it is Ready and labelled initialized. A node that came up
// (labelled initialized, not resumed since) and is not Ready now is down,
// not booting, however young: kube-scheduler keeps pods off it.
func (in Input) booting(n *corev1.Node) bool {
	if n.Labels[v1alpha1.LabelInitialized] == "true" && n.Annotations[v1alpha1.AnnotationResumedAt] == "" && !nodeutil.Ready(n) {
		return false
	}
	if in.Now.IsZero() || n.CreationTimestamp.IsZero() {
		return !nodeutil.Ready(n) || n.Labels[v1alpha1.LabelInitialized] != "true"
	}
	return in.Now.Sub(nodeutil.BootedSince(n)) < in.LaunchGrace
}

func newSnapshot(in Input, groups []*v1alpha1.NodeGroup, booting func(*corev1.Node) bool) (*snapshot.Snapshot, error) {
	byName := map[string]*v1alpha1.NodeGroup{}
	for _, g := range groups {
		byName[g.Name] = g
	}
	sin := snapshot.Input{Pods: in.Pods, Held: in.Held, Changes: in.Changes, Namespaces: in.Namespaces, Claims: in.Claims, Volumes: in.Volumes,
		DRA: in.DRA, OptionKeys: OptionKeys}
	devices, room := newDeviceTypes(groups), newDaemonSetRoom(in, byName, booting)
	seen := in.seen
	if seen == nil {
		seen = observe(in.Nodes, groups)
	}
	var dss []daemonset.Pod
	if len(seen.lists) > 0 && len(in.DaemonSets) > 0 {
		dss = daemonset.Pods(in.DaemonSets)
	}
	for _, n := range in.Nodes {
		n = in.replaced.apply(n)
		group := n.Labels[v1alpha1.LabelNodeGroup]
		var taints []corev1.Taint
		var ports []snapshot.HostPort
		var expected []*resourcev1.ResourceSlice
		if ng := byName[group]; ng != nil {
			n = seen.launched(n, ng, dss)
			up := booting(n)
			n, ports = room.kept(devices.expected(n, group, up))
			taints = transientTaints(n, ng, up)
			if up {
				expected = devices.expectedSlices(n, group)
			}
		}
		sin.Nodes = append(sin.Nodes, snapshot.NodeInput{Node: n, NodeGroup: group, IgnoreTaints: taints,
			ExpectedSlices: expected, HostPorts: ports})
	}
	if in.Base != nil {
		return in.Base.Snapshot(sin)
	}
	return snapshot.New(sin)
}

// TaintCloudUninitialized is the cloud controller manager's taint of a
// node not yet initialized (nodeutil.TaintCloudUninitialized).
const TaintCloudUninitialized = nodeutil.TaintCloudUninitialized

// transientTaints are taints of a berth-managed node that will go away on
// their own: while the node is booting, the group's startup taints (the
// agents that remove them may take a while after the node is Ready), the
// cloud controller manager's uninitialized taint and the taints that are
// startup taints by convention (nodeutil.StartupByConvention); and the not-ready
// and unreachable taints of the node lifecycle while the node is booting,
// or once it is Ready (the node lifecycle controller removes them a
// moment later). A startup taint still there past the launch grace is not
// going away: the node is no room for pods that do not tolerate it.
// up says whether the node is booting (Input.booting).
func transientTaints(n *corev1.Node, ng *v1alpha1.NodeGroup, up bool) []corev1.Taint {
	var out []corev1.Taint
	if up {
		out = nodeutil.StartupTaints(ng)
		for _, t := range n.Spec.Taints {
			if nodeutil.StartupByConvention(t) {
				out = append(out, corev1.Taint{Key: t.Key, Effect: t.Effect})
			}
		}
	}
	if nodeutil.Ready(n) || up {
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			out = append(out,
				corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute})
		}
	}
	return out
}

// belowMinSize reports whether a group has fewer nodes than its minSize,
// counted as the snapshot counts them (by the node group label), or the
// node list names a node twice (the snapshot refuses it: the full path
// reports the error).
func belowMinSize(nodes []*corev1.Node, groups []*v1alpha1.NodeGroup) bool {
	count := map[string]int{}
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if seen[n.Name] {
			return true
		}
		seen[n.Name] = true
		count[n.Labels[v1alpha1.LabelNodeGroup]]++
	}
	for _, g := range groups {
		if count[g.Name] < int(g.Spec.MinSize) {
			return true
		}
	}
	return false
}

// minSizeNodes lists one template per node a group lacks to reach its
// minSize, spread round-robin over the group's zones: in each zone the
// template with the cheapest option (a pending pod's spread over
// capacity or instance types splits a zone's template in several, one
// per value; which value a minSize node takes is not the pod's to say).
func minSizeNodes(s *snapshot.Snapshot, groups []*v1alpha1.NodeGroup, templates []*binpack.Template) []*binpack.Template {
	var out []*binpack.Template
	for _, g := range groups {
		missing := int(g.Spec.MinSize) - s.Group(g.Name).Nodes
		var zones []*binpack.Template // in the templates' (zone) order
		for _, t := range templates {
			if t.Group != g.Name {
				continue
			}
			if i := slices.IndexFunc(zones, func(z *binpack.Template) bool { return z.Zone == t.Zone }); i < 0 {
				zones = append(zones, t)
			} else if cheapestPrice(t) < cheapestPrice(zones[i]) {
				zones[i] = t
			}
		}
		for i := 0; i < missing && len(zones) > 0; i++ {
			out = append(out, zones[i%len(zones)])
		}
	}
	return out
}

// cheapestPrice is the price of a template's cheapest option.
func cheapestPrice(t *binpack.Template) float64 {
	price := math.Inf(1)
	for _, o := range t.Node.Flex.Options {
		price = min(price, o.Price)
	}
	return price
}

// withoutTemplates are the groups none of whose offerings may be launched
// now (Input.Unavailable): a pod's explanation names them too.
func withoutTemplates(groups []*v1alpha1.NodeGroup, templates []*binpack.Template) []string {
	var out []string
	for _, g := range groups {
		if !slices.ContainsFunc(templates, func(t *binpack.Template) bool { return t.Group == g.Name }) {
			out = append(out, g.Name)
		}
	}
	return out
}

func buildPlan(in binpack.Input, res *binpack.Result, unavailable []string) *Plan {
	plan := &Plan{ExistingNodePlacements: []Placement{}, Unschedulable: []Unschedulable{}, NewNodes: []NewNode{}}
	for _, pl := range res.Placements {
		if !pl.Node.Planned {
			plan.ExistingNodePlacements = append(plan.ExistingNodePlacements, Placement{Pod: ref(pl.Pod), Node: pl.Node.Name})
		}
	}
	for _, nn := range res.NewNodes {
		o, ok := optionOf(nn)
		if !ok {
			// Never expected: a planned node whose pods no instance type
			// holds. Its pods wait, explained, and the round goes on for
			// the other pods instead of failing as a whole.
			for _, p := range nn.Pods {
				plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: ref(p),
					Message: "berth planned this pod on a new node of " + nn.Template.Group + " that no instance type holds (a planner bug: please report it with `berth plan`'s input)"})
			}
			continue
		}
		n := NewNode{
			Name: nn.Node.Name, NodeGroup: o.NodeGroup, InstanceType: o.InstanceType, Zone: o.Zone,
			CapacityType: o.CapacityType, PricePerHour: nn.Option.Price, Reason: ReasonPendingPods, Pods: []PodRef{},
		}
		if nn.Initial {
			n.Reason = ReasonMinSize
		}
		for _, p := range nn.Pods {
			n.Pods = append(n.Pods, ref(p))
		}
		plan.NewNodes = append(plan.NewNodes, n)
		plan.PricePerHour += n.PricePerHour
	}
	for _, inv := range res.Invalid {
		plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: ref(inv.Pod), Message: "berth cannot read this pod: " + inv.Err.Error()})
	}
	explained := map[*snapshot.Class]string{}
	for _, p := range res.Unplaced {
		msg, ok := explained[p.Class]
		if !ok {
			msg = explain(in, p.Class, unavailable)
			explained[p.Class] = msg
		}
		plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: ref(p.Pod), Message: msg})
	}
	return plan
}

// optionOf is the offering a planned node launches, if it has one.
func optionOf(nn *binpack.NewNode) (*optionRef, bool) {
	if nn.Option == nil {
		return nil, false
	}
	o, ok := nn.Option.Ref.(*optionRef)
	return o, ok
}

// unavailableReason is why a group none of whose offerings may be
// launched now fits no pod.
const unavailableReason = "none of its offerings can be launched for now (a launch failed, the provider is at its limit, or its machines could not be listed: see the NodeGroup's events)"

// explain says, per node group, why a pod fits none:
// "0/2 node groups fit: large: untolerated taint size=large:NoSchedule;
// medium: insufficient cpu (needs 3, max 2)". The groups none of whose
// offerings may be launched now (unavailable) come first.
func explain(in binpack.Input, c *snapshot.Class, unavailable []string) string {
	verdicts := binpack.Explain(in, c)
	var order []string
	reasons := map[string][]string{}
	for _, g := range unavailable {
		order = append(order, g)
		reasons[g] = []string{unavailableReason}
	}
	for _, v := range verdicts {
		g := v.Template.Group
		if _, seen := reasons[g]; !seen {
			order = append(order, g)
			reasons[g] = nil
		}
		msg := v.Status.Message()
		if !v.Status.Failed() {
			msg = "fits, but not together with the other pending pods (affinity or spread)"
		}
		if !slices.Contains(reasons[g], msg) {
			reasons[g] = append(reasons[g], msg)
		}
	}
	parts := make([]string, 0, len(order))
	for _, g := range order {
		parts = append(parts, g+": "+strings.Join(reasons[g], ", "))
	}
	msg := fmt.Sprintf("0/%d node groups fit", len(order))
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, "; ")
	}
	return msg
}

// placeableAnywhere reports whether a pod could get a node at all: a
// node of some offering of a group, whether or not the offering can be
// launched this round (one in launch backoff is still a place for the
// pod, to wait for), or an existing node whose taints it tolerates and
// whose labels its required node selection matches. Room is not looked
// at. The groups are asked first: far fewer than the nodes of a large
// cluster.
func placeableAnywhere(s *snapshot.Snapshot, groups []*v1alpha1.NodeGroup, p *corev1.Pod) bool {
	aff := nodeaffinity.GetRequiredNodeAffinity(p)
	for _, g := range groups {
		if snapshot.GroupCouldTake(g, aff, p.Spec.Tolerations) {
			return true
		}
	}
	for _, n := range s.Nodes {
		if _, untolerated := snapshot.UntoleratedTaint(n.Taints, p.Spec.Tolerations); untolerated {
			continue
		}
		if ok, _ := aff.Match(n.Node); ok {
			return true
		}
	}
	return false
}
