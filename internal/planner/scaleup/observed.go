package scaleup

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// typeKey names an instance type of a node group.
type typeKey struct{ group, instanceType string }

// observed is, per instance type of a node group, what its nodes that are
// up (Ready, not being deleted, their startup taints gone) make
// allocatable: of each resource the most any of them has. A type's
// declared capacity is what a machine has; the kubelet makes less of it
// allocatable (kube-reserved, system-reserved, the eviction threshold, a
// cloud network's pod limit) and may publish what the type does not say
// (ephemeral storage, a device plugin's resources). A node launched from
// the type is planned with what its group's nodes of the type have
// (effective), as Cluster Autoscaler plans with a node of the group as
// its template: a pod that fits the declared capacity but no real node
// gets no node launched for it round after round. The most, not the
// least, so that one node whose device plugin failed does not take the
// devices off every launch. A Cluster API group's node whose instance
// type label names none of the group's types (it carries the cloud's
// name) is of the group's one type (typeOf).
type observed struct {
	lists map[typeKey]corev1.ResourceList
	// keys name, per group, what its nodes were seen with (for the
	// option cache).
	keys map[string]string
	// samples are, per group, the node read for its per-node pods (the
	// first by name of its nodes that are up); perNode what they are
	// (readPerNodePods).
	samples map[string]string
	perNode map[string]*perNodePods
}

// perNodePods are the pods every node of a group runs besides its
// DaemonSets' pods, as one of its nodes runs them: the mirrors of static
// pods (a kube-proxy or an API server proxy the kubelet runs from a
// file) and the pods of DaemonSet-like controllers of other kinds
// (podutil.AnnotationDaemonSetPod). A new node of the group runs them
// too, so they are its overhead, as Cluster Autoscaler copies them from
// a node of the group into its template (podsExpectedOnFreshNode).
type perNodePods struct {
	requests snapshot.Resources
	pods     int
	ports    []snapshot.HostPort
	key      string
}

// observe reads the nodes of the groups that are up.
func observe(nodes []*corev1.Node, groups []*v1alpha1.NodeGroup) *observed {
	type known struct {
		g       *v1alpha1.NodeGroup
		startup []corev1.Taint
		types   map[string]bool
	}
	byName := make(map[string]known, len(groups))
	for _, g := range groups {
		types := make(map[string]bool, len(g.Spec.InstanceTypes))
		for i := range g.Spec.InstanceTypes {
			types[g.Spec.InstanceTypes[i].Name] = true
		}
		byName[g.Name] = known{g: g, startup: nodeutil.StartupTaints(g), types: types}
	}
	out := &observed{lists: map[typeKey]corev1.ResourceList{}, keys: map[string]string{}, samples: map[string]string{}}
	for _, n := range nodes {
		k, ok := byName[n.Labels[v1alpha1.LabelNodeGroup]]
		if !ok || n.DeletionTimestamp != nil || !nodeutil.Ready(n) || startingUp(k.startup, n) {
			continue
		}
		if s, ok := out.samples[k.g.Name]; !ok || n.Name < s {
			out.samples[k.g.Name] = n.Name
		}
		it := n.Labels[v1alpha1.LabelInstanceType]
		if !k.types[it] {
			if it = typeOf(k.g, n); it == "" {
				continue
			}
		}
		key := typeKey{group: k.g.Name, instanceType: it}
		most := out.lists[key]
		if most == nil {
			most = corev1.ResourceList{}
			out.lists[key] = most
		}
		for name, q := range n.Status.Allocatable {
			if cur, ok := most[name]; !ok || q.Cmp(cur) > 0 {
				most[name] = q
			}
		}
	}
	out.name()
	return out
}

// typeOf is the group's instance type a node is of: the one its instance
// type label names; or, for a node of a Cluster API group (whose one type
// berth names, not the cloud, which labels the node with its own), the
// group's only type; "" when neither. (A group that is not Cluster API's
// names its types as its nodes are labelled: a node of a type the group
// no longer lists says nothing of the types it lists.)
func typeOf(g *v1alpha1.NodeGroup, n *corev1.Node) string {
	its, label := g.Spec.InstanceTypes, n.Labels[v1alpha1.LabelInstanceType]
	if label != "" && slices.ContainsFunc(its, func(it v1alpha1.InstanceType) bool { return it.Name == label }) {
		return label
	}
	if g.Spec.Provider.ClusterAPI != nil && len(its) == 1 {
		return its[0].Name
	}
	return ""
}

// startingUp reports whether a node still carries one of its group's
// startup taints, or one by convention: its allocatable may not be
// complete yet.
func startingUp(startup []corev1.Taint, n *corev1.Node) bool {
	if slices.ContainsFunc(n.Spec.Taints, nodeutil.StartupByConvention) {
		return true
	}
	for _, t := range startup {
		if slices.ContainsFunc(n.Spec.Taints, func(nt corev1.Taint) bool { return nt.Key == t.Key && nt.Effect == t.Effect }) {
			return true
		}
	}
	return false
}

// effective is what a node of the type is planned with: the declared
// capacity, but a resource the group's nodes have less of (and more than
// none) at what they have, and one the type does not say at what they
// have; seen reports whether the group's nodes said anything (else the
// declared capacity itself).
func (o *observed) effective(group string, it *v1alpha1.InstanceType) (list corev1.ResourceList, seen bool) {
	var got corev1.ResourceList
	if o != nil {
		got = o.lists[typeKey{group: group, instanceType: it.Name}]
	}
	if len(got) == 0 {
		return it.Capacity, false
	}
	out := make(corev1.ResourceList, max(len(it.Capacity), len(got)))
	for name, q := range it.Capacity {
		if s, ok := got[name]; ok && s.Sign() > 0 && s.Cmp(q) < 0 {
			q = s
		}
		out[name] = q
	}
	for name, s := range got {
		if _, ok := it.Capacity[name]; !ok && s.Sign() > 0 {
			out[name] = s
		}
	}
	return out, true
}

// launched is a launched instance whose Node has not registered, as the
// controller shows it (a node it built from the type's capacity, pods
// 110 when the type does not say, less its DaemonSets' room:
// daemonset.AnnotationRoomKept, never Ready nor initialized), with what
// the group's nodes of its type have (effective) where that differs:
// the Node will register so, as the round that launched it planned it. A
// resource the type says counts in limits as the type says; one it does
// not say (pods, ephemeral storage, a device plugin's) as its nodes have
// it, less the room of the DaemonSets that run there (dss) for its
// allocatable. Any other node as it is.
func (o *observed) launched(n *corev1.Node, g *v1alpha1.NodeGroup, dss []daemonset.Pod) *corev1.Node {
	if o == nil || len(o.lists) == 0 || n.Annotations[daemonset.AnnotationRoomKept] == "" || n.Labels[v1alpha1.LabelInitialized] == "true" || nodeutil.Ready(n) {
		return n
	}
	name := typeOf(g, n)
	i := slices.IndexFunc(g.Spec.InstanceTypes, func(it v1alpha1.InstanceType) bool { return it.Name == name })
	if i < 0 {
		return n
	}
	it := &g.Spec.InstanceTypes[i]
	eff, seen := o.effective(g.Name, it)
	if !seen {
		return n
	}
	cp := *n
	cp.Status.Allocatable, cp.Status.Capacity = n.Status.Allocatable.DeepCopy(), n.Status.Capacity.DeepCopy()
	var planned *corev1.Node
	for res, e := range eff {
		_, says := it.Capacity[res]
		capacity, known := n.Status.Capacity[res]
		if known && (e.Cmp(capacity) == 0 || says && e.Cmp(capacity) > 0) {
			continue // as the type says, or more than it says (counted as it says)
		}
		var room resource.Quantity // what the DaemonSets take of it
		if a, ok := n.Status.Allocatable[res]; known && ok {
			room = capacity.DeepCopy()
			room.Sub(a)
		} else {
			if planned == nil {
				planned = &corev1.Node{ObjectMeta: n.ObjectMeta, Spec: corev1.NodeSpec{Taints: g.NodeTaints()}}
			}
			for _, d := range dss {
				if q, ok := d.List[res]; ok && d.RunsOn(planned) {
					room.Add(q)
				}
			}
		}
		a := e.DeepCopy()
		a.Sub(room)
		if a.Sign() < 0 {
			a.Set(0)
		}
		cp.Status.Allocatable[res] = a
		if !says {
			cp.Status.Capacity[res] = e
		}
	}
	return &cp
}

// name fills keys: per group, its types and what their nodes have.
func (o *observed) name() {
	parts := map[string][]string{}
	for k, list := range o.lists {
		names := make([]string, 0, len(list))
		for name, q := range list {
			names = append(names, string(name)+"="+q.String())
		}
		slices.Sort(names)
		parts[k.group] = append(parts[k.group], k.instanceType+":"+strings.Join(names, ","))
	}
	for g, p := range parts {
		slices.Sort(p)
		o.keys[g] = strings.Join(p, ";")
	}
}

// key names what the group's nodes were seen with, for the option cache.
func (o *observed) key(group string) string {
	if o == nil {
		return ""
	}
	if p := o.perNode[group]; p != nil {
		return o.keys[group] + "|" + p.key
	}
	return o.keys[group]
}

// readPerNodePods reads each group's per-node pods (perNodePods) off its
// sample node in s: O(the pods on one node per group).
func (o *observed) readPerNodePods(s *snapshot.Snapshot) {
	if o == nil {
		return
	}
	o.perNode = nil
	for g, name := range o.samples {
		n := s.Node(name)
		if n == nil {
			continue
		}
		var p *perNodePods
		for _, pod := range n.Pods {
			if !podutil.IsMirror(pod.Pod) && (!podutil.IsDaemonSetPod(pod.Pod) || podutil.IsOwnedByDaemonSet(pod.Pod)) {
				continue // DaemonSets' pods are read from the DaemonSets
			}
			if p == nil {
				p = &perNodePods{}
			}
			p.requests.Add(&pod.Class.Base)
			p.pods++
			p.ports = append(p.ports, pod.Class.HostPorts...)
		}
		if p == nil {
			continue
		}
		r := &p.requests // fmt prints a map's keys sorted
		p.key = fmt.Sprintf("%d,%d,%d,%v,%d,%v", r.MilliCPU, r.Memory, r.EphemeralStorage, r.Scalar, p.pods, p.ports)
		if o.perNode == nil {
			o.perNode = map[string]*perNodePods{}
		}
		o.perNode[g] = p
	}
}

// perNodeOf is the group's per-node pods, nil when it has none (or no
// node up to read them from).
func (o *observed) perNodeOf(group string) *perNodePods {
	if o == nil {
		return nil
	}
	return o.perNode[group]
}
