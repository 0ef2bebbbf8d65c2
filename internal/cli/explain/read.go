package explain

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/controller/provisioning"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// maxEvents bounds how many events about the pod are read.
const maxEvents = 200

// Settings are what the caller sets besides the cluster: the
// controller's settings the plans depend on, and the time.
type Settings struct {
	// Limits are the controller's --cluster-max-*, --max-nodes-total and
	// --max-nodes-per-round.
	Limits scaleup.Limits
	// LaunchGrace is the controller's --max-provision-time: how long a
	// node of berth's that is not Ready counts as booting.
	LaunchGrace time.Duration
	// Now is the time the plans are made at.
	Now time.Time
	// Cloud, when set, refreshes the node groups it serves as the
	// controller does before each round (cloudprovider.Refresh: a Cluster
	// API object's annotations and templates); nil plans every group
	// from its spec.
	Cloud cloudprovider.CloudProvider
	// held are the groups no removal starts in besides those the
	// controller's ScaleDownSuspended condition names: those refresh
	// could not read, as the disruption controller holds them.
	held map[string]string
	// unlisted are the groups whose launching instances could not be
	// listed, in which the provisioner launches nothing.
	unlisted []*v1alpha1.NodeGroup
}

// booting are the nodes of the instances s.Cloud is still launching (a
// Cluster API Machine whose Node has not registered), as the
// provisioner plans them (provisioning.BootingOf), so that a pod the
// controller waits for a booting machine for is not explained as a
// launch. It returns the groups whose launching instances could not be
// listed, and a note for each.
func (s Settings) booting(ctx context.Context, cl *clusterread.Cluster) (nodes []*corev1.Node, unlisted []*v1alpha1.NodeGroup, notes []string) {
	if s.Cloud == nil {
		return nil, nil, nil
	}
	groups := cl.Active()
	pending, failed := cloudprovider.Pending(ctx, s.Cloud, groups)
	for _, g := range groups {
		if err, ok := failed[g.Name]; ok {
			unlisted = append(unlisted, g)
			notes = append(notes, fmt.Sprintf("node group %s: the controller launches nothing there while its launching instances cannot be listed (%v)", g.Name, err))
		}
	}
	b := provisioning.BootingOf(groups, pending, cl.Nodes, daemonset.Pods(cl.DaemonSets), s.Now, s.LaunchGrace)
	return b.Nodes, unlisted, notes
}

// refresh applies s.Cloud to the groups, as the controller does before
// a round. It returns a note for each group it could not refresh
// (planned from its spec, as the controller plans it then) and for each
// Cluster API group when there is no Cloud to read it, and the groups it
// could not refresh, which the disruption controller holds from
// removals (Settings.held), with why.
func (s Settings) refresh(ctx context.Context, groups []*v1alpha1.NodeGroup) (notes []string, held map[string]string) {
	if s.Cloud == nil {
		for _, g := range groups {
			if g.Spec.Provider.ClusterAPI != nil {
				notes = append(notes, fmt.Sprintf("node group %s is planned from its spec: run with the controller's --clusterapi flags to read its Cluster API object as the controller does", g.Name))
			}
		}
		return notes, nil
	}
	for name, err := range cloudprovider.Refresh(ctx, s.Cloud, groups) {
		notes = append(notes, fmt.Sprintf("node group %s is planned from its spec, and no removal starts in it: its provider could not read it (%v)", name, err))
		if held == nil {
			held = map[string]string{}
		}
		held[name] = "its provider could not refresh it this round: " + err.Error()
	}
	slices.Sort(notes)
	return notes, held
}

// Pod reads the cluster from c (the API server, not a cache), plans
// scale-up as the controller does, with the pod among the pending pods
// even if the scheduler has not tried it yet, and explains the pod.
func Pod(ctx context.Context, c client.Reader, key types.NamespacedName, s Settings) (Explanation, error) {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); apierrors.IsNotFound(err) {
		return Explanation{}, fmt.Errorf("pod %s not found", key)
	} else if err != nil {
		return Explanation{}, fmt.Errorf("reading pod %s: %w", key, err)
	}
	cl, err := clusterread.Read(ctx, c, clusterread.Parts{})
	if err != nil {
		return Explanation{}, err
	}
	notes, _ := s.refresh(ctx, cl.Active()) // the groups the provisioner refreshes; scale-up holds none
	booting, unlisted, bootNotes := s.booting(ctx, cl)
	cl.Nodes = append(cl.Nodes, booting...)
	s.unlisted, notes = unlisted, append(notes, bootNotes...)
	virtual, err := units(ctx, c, cl.Active())
	if err != nil {
		return Explanation{}, err
	}
	f, err := planPod(cl, pod, virtual, s)
	if err != nil {
		return Explanation{}, err
	}
	f.event, err = scaleUpEvent(ctx, c, pod)
	e := explainPod(f)
	e.Notes = append(e.Notes, notes...)
	if err != nil {
		e.Notes = append(e.Notes, fmt.Sprintf("the pod's events could not be read: %v", err))
	}
	return e, nil
}

// planPod plans scale-up for the pod when berth would plan it (not bound,
// not nominated to a node that exists, not excluded by notPlanned).
func planPod(cl *clusterread.Cluster, pod *corev1.Pod, units []*corev1.Pod, s Settings) (podFacts, error) {
	burst := podutil.NewBurst(cl.Pods)
	f := podFacts{pod: pod, nodes: byName(cl.Nodes), now: s.Now, awaits: burst.AwaitsNode(pod), booting: s.Cloud != nil}
	for _, g := range cl.Active() {
		f.groups = append(f.groups, g.Name)
	}
	if reason, _ := notPlanned(pod); reason != "" || podutil.IsBound(pod) || nominatedTo(pod, f.nodes) != "" {
		return f, nil
	}
	in := scaleUpInput(cl, burst, pod, s)
	in.Pending = append(in.Pending, units...)
	plan, err := scaleup.Run(in)
	if err != nil {
		return f, fmt.Errorf("planning: %w", err)
	}
	f.plan = plan
	return f, nil
}

// scaleUpInput is the provisioner's input (provisioning/gather.go and
// round.go): bound pods, pods nominated to a node that exists as bound to
// it, pods awaiting a node (burst: podutil.NewBurst of the cluster's
// pods) as pending, and the asked pod pending too.
func scaleUpInput(cl *clusterread.Cluster, burst podutil.Burst, asked *corev1.Pod, s Settings) scaleup.Input {
	in := scaleup.Input{NodeGroups: cl.Active(), Nodes: cl.Nodes, DaemonSets: cl.DaemonSets, Namespaces: cl.Namespaces,
		Claims: cl.Claims, Volumes: cl.Volumes, DRA: cl.DRA, Limits: s.Limits, Now: s.Now, LaunchGrace: s.LaunchGrace}
	nodes := byName(cl.Nodes)
	in.Unavailable = unavailable(in.NodeGroups, s.Now)
	for _, g := range s.unlisted { // the provisioner launches nothing there (unlistedOfferings)
		in.Unavailable = append(in.Unavailable, provisioning.OfferingsOf(g)...)
	}
	for _, p := range cl.Pods {
		if p.UID == asked.UID || (p.Namespace == asked.Namespace && p.Name == asked.Name) {
			continue
		}
		switch {
		case podutil.IsBound(p):
			in.Pods = append(in.Pods, p)
		case nominatedTo(p, nodes) != "":
			in.Pods = append(in.Pods, podutil.HeldOn(p, p.Status.NominatedNodeName))
		case burst.AwaitsNode(p):
			in.Pending = append(in.Pending, p)
		}
	}
	in.Pending = append(in.Pending, asked)
	return in
}

// Node reads the cluster from c, plans scale-down as the
// controller does, and explains the node.
func Node(ctx context.Context, c client.Reader, name string, s Settings) (Explanation, error) {
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); apierrors.IsNotFound(err) {
		return Explanation{}, fmt.Errorf("node %s not found", name)
	} else if err != nil {
		return Explanation{}, fmt.Errorf("reading node %s: %w", name, err)
	}
	cl, err := clusterread.Read(ctx, c, clusterread.Parts{Budgets: true, Controllers: true})
	if err != nil {
		return Explanation{}, err
	}
	notes, held := s.refresh(ctx, cl.NodeGroups)
	s.held = held
	virtual, err := units(ctx, c, cl.NodeGroups)
	if err != nil {
		return Explanation{}, err
	}
	f, err := planNode(cl, node, virtual, s)
	if err != nil {
		return Explanation{}, err
	}
	e := explainNode(f)
	e.Notes = append(e.Notes, notes...)
	return e, nil
}

// planNode plans scale-down for the cluster and gathers what explainNode
// reads about the node.
func planNode(cl *clusterread.Cluster, node *corev1.Node, units []*corev1.Pod, s Settings) (nodeFacts, error) {
	f := nodeFacts{node: node, now: s.Now}
	for _, g := range cl.NodeGroups {
		if g.Name == node.Labels[v1alpha1.LabelNodeGroup] {
			f.group = g
		}
	}
	for _, n := range cl.Nodes {
		if by := n.Annotations[v1alpha1.AnnotationReplacedBy]; by == node.Name {
			f.replaces = append(f.replaces, n.Name)
		} else if by != "" {
			f.replacing = n.Name
		}
	}
	in := scaleDownInput(cl, s)
	in.Virtual = units
	plan, err := scaledown.Run(in)
	if err != nil {
		return f, fmt.Errorf("planning scale-down: %w", err)
	}
	f.plan = plan
	return f, nil
}

// scaleDownInput is the disruption controller's input
// (disruption/gather.go); the groups it holds are read from their
// ScaleDownSuspended condition, which the controller writes from them.
func scaleDownInput(cl *clusterread.Cluster, s Settings) scaledown.Input {
	in := scaledown.Input{NodeGroups: cl.NodeGroups, Nodes: cl.Nodes, PDBs: cl.PDBs, DaemonSets: cl.DaemonSets, Namespaces: cl.Namespaces,
		Claims: cl.Claims, Volumes: cl.Volumes, DRA: cl.DRA, Controllers: cl.Controllers, Limits: s.Limits, Now: s.Now, LaunchGrace: s.LaunchGrace}
	in.Unavailable = unavailable(cl.NodeGroups, s.Now)
	in.Cooling = scaledown.Cooling(cl.Nodes, s.Now)
	in.AddPods(cl.Pods, podutil.NewBurst(cl.Pods).AwaitsNode)
	for _, g := range cl.NodeGroups {
		if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionScaleDownSuspended); c != nil && c.Status == metav1.ConditionTrue {
			if in.Held == nil {
				in.Held = map[string]string{}
			}
			in.Held[g.Name] = c.Message
		}
	}
	for name, why := range s.held {
		if in.Held == nil {
			in.Held = map[string]string{}
		}
		in.Held[name] = why
	}
	return in
}

// unavailable are the offerings the controller avoids now, as the node
// groups' status publishes them (both planners are given them).
func unavailable(groups []*v1alpha1.NodeGroup, now time.Time) []scaleup.Offering {
	var out []scaleup.Offering
	for _, g := range groups {
		for _, u := range g.Status.UnavailableOfferings {
			if u.Until.After(now) {
				out = append(out, scaleup.Offering{NodeGroup: g.Name, InstanceType: u.InstanceType, Zone: u.Zone, CapacityType: string(u.CapacityType)})
			}
		}
	}
	return out
}

// units are the Headroom units and CapacityBuffer chunks, capped as the
// controllers cap them, as pods.
func units(ctx context.Context, c client.Reader, groups []*v1alpha1.NodeGroup) ([]*corev1.Pod, error) {
	sets, err := clusterread.Units(ctx, c, groups)
	if err != nil {
		return nil, err
	}
	units, _ := clusterread.MakeUnits(sets, clusterread.DefaultMaxUnits) // the provisioner reports the cut
	out := make([]*corev1.Pod, 0, len(units))
	for _, u := range units {
		out = append(out, u.Pod)
	}
	return out, nil
}

// scaleUpEvent is berth's latest TriggeredScaleUp or NotTriggerScaleUp
// event about the pod, or nil.
func scaleUpEvent(ctx context.Context, c client.Reader, pod *corev1.Pod) (*eventsv1.Event, error) {
	evs := &eventsv1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(pod.Namespace), client.MatchingFields{"regarding.uid": string(pod.UID)},
		client.Limit(maxEvents)); err != nil {
		return nil, err
	}
	return latestScaleUp(evs.Items), nil
}

func byName(nodes []*corev1.Node) map[string]*corev1.Node {
	out := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		out[n.Name] = n
	}
	return out
}
