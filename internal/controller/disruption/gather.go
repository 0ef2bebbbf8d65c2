package disruption

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/podutil"
)

// world is the cluster as one round sees it. Its nodes are the informer
// cache's own objects until the round writes one (own).
type world struct {
	input  scaledown.Input
	nodes  []*corev1.Node
	byName map[string]*corev1.Node
	groups map[string]*v1alpha1.NodeGroup
	// podsOn are the pods bound to each node.
	podsOn map[string][]*corev1.Pod
	// index is each node's place in nodes; owned the nodes own copied.
	index map[string]int
	owned map[string]bool
	// launching are the instances the provider still launches (their
	// node names; nil until a replacement past its grace asks), and
	// launchingUnsure whether it could not answer for some group.
	launching       map[string]bool
	launchingUnsure bool
}

// own returns the round's own copy of the node, to change before patching
// it: the cache's objects are shared and never changed. The copy, made
// once a round, takes the node's place in the world, so that the rest of
// the round (the plan included) sees what the round wrote.
func (w *world) own(n *corev1.Node) *corev1.Node {
	if w.owned[n.Name] {
		return w.byName[n.Name]
	}
	cp := n.DeepCopy()
	w.owned[n.Name] = true
	w.byName[n.Name] = cp
	if i, ok := w.index[n.Name]; ok {
		w.nodes[i] = cp
	}
	return cp
}

// withPodsOn returns the planner's input with the node's pods replaced by
// pods (read fresh from the API server).
func (w *world) withPodsOn(node string, pods []*corev1.Pod) scaledown.Input {
	in := w.input
	in.Pods = make([]*corev1.Pod, 0, len(w.input.Pods)+len(pods))
	for _, p := range w.input.Pods {
		if p.Spec.NodeName != node {
			in.Pods = append(in.Pods, p)
		}
	}
	for _, p := range pods {
		if podutil.IsBound(p) {
			in.Pods = append(in.Pods, p)
		}
	}
	return in
}

// gather reads the cluster from the informer cache.
func (c *Controller) gather(ctx context.Context) (*world, error) {
	cl, err := clusterread.Read(ctx, c.Client, clusterread.Parts{SharedNodes: true, Budgets: true, Controllers: true, Informers: c.informers})
	if err != nil {
		return nil, err
	}
	w := &world{byName: map[string]*corev1.Node{}, groups: map[string]*v1alpha1.NodeGroup{}, podsOn: map[string][]*corev1.Pod{},
		index: map[string]int{}, owned: map[string]bool{}}
	w.input = scaledown.Input{NodeGroups: cl.NodeGroups, Nodes: cl.Nodes, PDBs: cl.PDBs, DaemonSets: cl.DaemonSets, Namespaces: cl.Namespaces,
		Claims: cl.Claims, Volumes: cl.Volumes, DRA: cl.DRA, Controllers: cl.Controllers, Limits: c.opts.Limits}
	w.input.Base, w.input.WhatIf = c.base, c.whatIf
	if c.Offerings != nil {
		w.input.Unavailable = c.Offerings.Unavailable()
	}
	for _, g := range cl.NodeGroups {
		w.groups[g.Name] = g
	}
	refreshFailed := cloudprovider.Refresh(ctx, c.Cloud, w.input.NodeGroups)
	for name, err := range refreshFailed {
		log.FromContext(ctx).Info("no removal starts in the node group this round: its provider could not refresh it", "nodeGroup", name, "error", err.Error())
	}
	w.nodes = cl.Nodes
	for i, n := range cl.Nodes {
		w.byName[n.Name] = n
		w.index[n.Name] = i
	}
	// A pod that waits takes its room before any removal; if it fits
	// nowhere it is scale-up's matter and holds no removal back (no
	// replacement whose room it could take is planned).
	w.input.AddPods(cl.Pods, podutil.NewBurst(cl.Pods).AwaitsNode)
	for _, p := range w.input.Pods {
		w.podsOn[p.Spec.NodeName] = append(w.podsOn[p.Spec.NodeName], p)
	}
	sets, err := clusterread.Units(ctx, c.Client, w.input.NodeGroups)
	if err != nil {
		return nil, err
	}
	units, _ := clusterread.MakeUnits(sets, clusterread.DefaultMaxUnits) // the provisioner reports the cut
	for _, u := range units {
		w.input.Virtual = append(w.input.Virtual, u.Pod)
	}
	w.input.Held = c.held(w.input.NodeGroups)
	// A group its provider could not refresh is planned with its spec,
	// which may remove sooner (consolidateAfter) or below bounds its
	// object sets: no removal starts there this round.
	for name, err := range refreshFailed {
		if w.input.Held == nil {
			w.input.Held = map[string]string{}
		}
		w.input.Held[name] = "its provider could not refresh it this round: " + err.Error()
	}
	w.input.Now, w.input.LaunchGrace = c.Clock.Now(), c.maxProvisionTime()
	return w, nil
}

// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=replicationcontrollers,verbs=get;list;watch
// (clusterread.Read reads the workload controllers' metadata for the drain
// rules; controller-gen reads markers in internal/controller only.)

// held are the node groups where no removal starts now: those where the
// provisioner is bringing capacity for a waiting pod, and all of them
// until the provisioner has published its first round.
func (c *Controller) held(groups []*v1alpha1.NodeGroup) map[string]string {
	if c.Holds == nil {
		return nil
	}
	out := map[string]string{}
	if !c.Holds.Published() {
		for _, g := range groups {
			out[g.Name] = "the provisioner has not finished its first round since this controller started"
		}
		return out
	}
	for g, h := range c.Holds.All() {
		out[g] = h.Message
	}
	return out
}

// cooling are the nodes whose drain berth gave up within scaledown.GiveUpCooldown:
// as the nodes say (berth.dev/drain-given-up, written by the patch that
// stopped the drain: a restart forgets nothing), and as this replica
// remembers (this round's, which the cache may not show yet).
func (c *Controller) cooling(w *world) map[string]string {
	out := scaledown.Cooling(w.input.Nodes, c.Clock.Now())
	for name, at := range c.givenUp {
		if c.Clock.Since(at) <= scaledown.GiveUpCooldown {
			out[name] = scaledown.CoolingMessage(name, at)
		}
	}
	return out
}
