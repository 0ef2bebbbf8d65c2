package disruption

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/draread"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/virtualunits"
)

// world is the cluster as one round sees it.
type world struct {
	input  scaledown.Input
	nodes  []*corev1.Node
	byName map[string]*corev1.Node
	groups map[string]*v1alpha1.NodeGroup
	// podsOn are the pods bound to each node.
	podsOn map[string][]*corev1.Pod
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
	w := &world{byName: map[string]*corev1.Node{}, groups: map[string]*v1alpha1.NodeGroup{}, podsOn: map[string][]*corev1.Pod{}}
	w.input.ClusterLimits = c.opts.ClusterLimits
	ngs := &v1alpha1.NodeGroupList{}
	if err := c.Client.List(ctx, ngs); err != nil {
		return nil, fmt.Errorf("listing node groups: %w", err)
	}
	for i := range ngs.Items {
		g := &ngs.Items[i]
		w.input.NodeGroups = append(w.input.NodeGroups, g)
		w.groups[g.Name] = g
	}
	for name, err := range cloudprovider.Refresh(ctx, c.Cloud, w.input.NodeGroups) {
		log.FromContext(ctx).Info("planning scale-down with the node group's spec: its provider could not refresh it", "nodeGroup", name, "error", err.Error())
	}
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		w.nodes = append(w.nodes, n)
		w.byName[n.Name] = n
	}
	w.input.Nodes = w.nodes
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Spec.NodeName != "":
			w.input.Pods = append(w.input.Pods, p)
			w.podsOn[p.Spec.NodeName] = append(w.podsOn[p.Spec.NodeName], p)
		case podutil.IsUnbound(p) && p.Status.NominatedNodeName != "":
			w.input.Nominated = append(w.input.Nominated, p)
		case podutil.AwaitsNode(p):
			// It takes its room before any removal; if it fits nowhere it
			// is scale-up's matter and holds nothing back.
			w.input.Pending = append(w.input.Pending, p)
		}
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := c.Client.List(ctx, pdbs); err != nil {
		return nil, fmt.Errorf("listing poddisruptionbudgets: %w", err)
	}
	for i := range pdbs.Items {
		w.input.PDBs = append(w.input.PDBs, &pdbs.Items[i])
	}
	dss := &appsv1.DaemonSetList{}
	if err := c.Client.List(ctx, dss); err != nil {
		return nil, fmt.Errorf("listing daemonsets: %w", err)
	}
	for i := range dss.Items {
		w.input.DaemonSets = append(w.input.DaemonSets, &dss.Items[i])
	}
	nss := &corev1.NamespaceList{}
	if err := c.Client.List(ctx, nss); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range nss.Items {
		w.input.Namespaces = append(w.input.Namespaces, &nss.Items[i])
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := c.Client.List(ctx, pvcs); err != nil {
		return nil, fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	for i := range pvcs.Items {
		w.input.Claims = append(w.input.Claims, &pvcs.Items[i])
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := c.Client.List(ctx, pvs); err != nil {
		return nil, fmt.Errorf("listing persistentvolumes: %w", err)
	}
	for i := range pvs.Items {
		w.input.Volumes = append(w.input.Volumes, &pvs.Items[i])
	}
	dra, err := draread.List(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	w.input.DRA = dra
	sets, err := virtualunits.List(ctx, c.Client, w.input.NodeGroups)
	if err != nil {
		return nil, err
	}
	units, _ := virtualunits.Make(sets, virtualunits.DefaultMax) // the provisioner reports the cut
	for _, u := range units {
		w.input.Virtual = append(w.input.Virtual, u.Pod)
	}
	w.input.Held = c.held(w.input.NodeGroups)

	w.input.Now = c.Clock.Now()
	if w.input.Controllers, err = c.controllers(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=replicationcontrollers,verbs=get;list;watch

// controllerKinds are the workload controllers whose existence the drain
// rules check (their metadata only is cached).
var controllerKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "ReplicaSetList"},
	{Group: "apps", Version: "v1", Kind: "StatefulSetList"},
	{Group: "apps", Version: "v1", Kind: "DaemonSetList"},
	{Group: "batch", Version: "v1", Kind: "JobList"},
	{Group: "", Version: "v1", Kind: "ReplicationControllerList"},
}

// controllers are the UIDs of the workload controllers that exist: a pod
// whose controller is not among them would not come back once evicted.
func (c *Controller) controllers(ctx context.Context) (map[types.UID]bool, error) {
	out := map[types.UID]bool{}
	for _, gvk := range controllerKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := c.Client.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			out[list.Items[i].UID] = true
		}
	}
	return out, nil
}

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

// cooling are the nodes whose drain this replica gave up within
// GiveUpCooldown (this round's included).
func (c *Controller) cooling() map[string]string {
	out := map[string]string{}
	for name, at := range c.givenUp {
		if c.Clock.Since(at) <= GiveUpCooldown {
			out[name] = fmt.Sprintf("berth gave up draining node %s at %s; it is not drained again for %s", name, at.UTC().Format(time.RFC3339), GiveUpCooldown)
		}
	}
	return out
}
