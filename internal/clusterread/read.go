package clusterread

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Cluster is the cluster as one planning round reads it. DaemonSets
// are as their pods run (daemonset.AsRun, with the LimitRanges of their
// namespaces and the RuntimeClasses). Pods,
// DaemonSets, Namespaces, Claims, Volumes and PDBs are the informer
// cache's own objects, read without a copy (a round over 5,000 nodes x 30
// pods would otherwise copy 150,000 pods): never change one, copy it
// first (DeepCopy). NodeGroups are copies the round may change (providers
// refresh groups in place), Nodes too unless Parts.SharedNodes (then a
// round that writes a node copies it first).
type Cluster struct {
	// NodeGroups are every group, those being deleted included (scale-down
	// drains them); Active leaves those out.
	NodeGroups []*v1alpha1.NodeGroup
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
	DaemonSets []*appsv1.DaemonSet
	Namespaces []*corev1.Namespace
	Claims     []*corev1.PersistentVolumeClaim
	Volumes    []*corev1.PersistentVolume
	DRA        snapshot.DRA
	// PDBs and Controllers are read when Parts asks for them.
	PDBs        []*policyv1.PodDisruptionBudget
	Controllers map[types.UID]bool
}

// Parts are the parts of the cluster only some rounds need.
type Parts struct {
	// SharedNodes: Nodes are the cache's own objects too: the round
	// never changes one, or copies it first (the disruption controller's
	// world.own); a copy of every node each round is megabytes on a large
	// cluster.
	SharedNodes bool
	// Budgets: PodDisruptionBudgets.
	Budgets bool
	// Controllers: the UIDs of the workload controllers that exist.
	Controllers bool
	// Informers, when set, is the cache the reader reads from: pods (and
	// nodes, with SharedNodes) are then taken from the informers' stores
	// without even the struct copy a List makes.
	Informers crcache.Informers
	// NoPods: the pods are not read (the caller has them from
	// PodChanges.TakeIndexed); DaemonSetPods, the DaemonSets' newest pods
	// from the same take, then say how the DaemonSets run.
	NoPods        bool
	DaemonSetPods daemonset.Newest
}

// Read reads the cluster from c (the manager's cache).
func Read(ctx context.Context, c client.Reader, parts Parts) (*Cluster, error) {
	out := &Cluster{}
	ngs := &v1alpha1.NodeGroupList{}
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	dss := &appsv1.DaemonSetList{}
	nss := &corev1.NamespaceList{}
	pvcs := &corev1.PersistentVolumeClaimList{}
	pvs := &corev1.PersistentVolumeList{}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	lrs := &corev1.LimitRangeList{}
	rcs := &nodev1.RuntimeClassList{}
	type list struct {
		what   string
		list   client.ObjectList
		shared bool // the cache's own objects, not copies
	}
	lists := []list{{"node groups", ngs, false}, {"nodes", nodes, parts.SharedNodes}, {"pods", pods, true}, {"daemonsets", dss, true},
		{"namespaces", nss, true}, {"persistentvolumeclaims", pvcs, true}, {"persistentvolumes", pvs, true},
		{"limitranges", lrs, true}, {"runtimeclasses", rcs, true}}
	if parts.Budgets {
		lists = append(lists, list{"poddisruptionbudgets", pdbs, true})
	}
	if parts.Informers != nil {
		if err := readStores(ctx, parts.Informers, parts.SharedNodes, !parts.NoPods, out); err != nil {
			return nil, err
		}
	}
	// What a store gave, or what is not wanted, is not listed.
	lists = slices.DeleteFunc(lists, func(l list) bool {
		return (l.list == pods && (out.Pods != nil || parts.NoPods)) || (l.list == nodes && out.Nodes != nil)
	})
	for _, l := range lists {
		var opts []client.ListOption
		if l.shared {
			opts = append(opts, client.UnsafeDisableDeepCopy)
		}
		if err := c.List(ctx, l.list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	out.NodeGroups = pointers(ngs.Items)
	if out.Nodes == nil {
		out.Nodes = pointers(nodes.Items)
	}
	if out.Pods == nil && !parts.NoPods {
		out.Pods = pointers(pods.Items)
	}
	newest := parts.DaemonSetPods
	if out.Pods != nil {
		newest = daemonset.NewestOf(out.Pods)
	}
	out.DaemonSets = daemonset.AsRun(pointers(dss.Items), newest,
		daemonset.Admission{LimitRanges: pointers(lrs.Items), RuntimeClasses: pointers(rcs.Items)})
	out.Namespaces = pointers(nss.Items)
	out.Claims = pointers(pvcs.Items)
	out.Volumes = pointers(pvs.Items)
	out.PDBs = pointers(pdbs.Items)
	dra, err := DRA(ctx, c)
	if err != nil {
		return nil, err
	}
	out.DRA = dra
	if parts.Controllers {
		if out.Controllers, err = controllers(ctx, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Active are the node groups not being deleted: those scale-up may launch
// nodes of.
func (c *Cluster) Active() []*v1alpha1.NodeGroup {
	var out []*v1alpha1.NodeGroup
	for _, g := range c.NodeGroups {
		if g.DeletionTimestamp == nil {
			out = append(out, g)
		}
	}
	return out
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

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
func controllers(ctx context.Context, c client.Reader) (map[types.UID]bool, error) {
	out := map[types.UID]bool{}
	for _, gvk := range controllerKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			out[list.Items[i].UID] = true
		}
	}
	return out, nil
}
