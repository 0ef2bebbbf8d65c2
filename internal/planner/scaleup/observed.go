package scaleup

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
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
// devices off every launch.
type observed map[typeKey]corev1.ResourceList

// observe reads the nodes of the groups that are up.
func observe(nodes []*snapshot.Node, groups []*v1alpha1.NodeGroup) observed {
	byName := make(map[string]*v1alpha1.NodeGroup, len(groups))
	for _, g := range groups {
		byName[g.Name] = g
	}
	out := observed{}
	for _, sn := range nodes {
		n := sn.Node
		g := byName[sn.NodeGroup]
		it := n.Labels[v1alpha1.LabelInstanceType]
		if g == nil || it == "" || n.DeletionTimestamp != nil || !nodeutil.Ready(n) || startingUp(g, n) {
			continue
		}
		key := typeKey{group: g.Name, instanceType: it}
		most := out[key]
		if most == nil {
			most = corev1.ResourceList{}
			out[key] = most
		}
		for name, q := range n.Status.Allocatable {
			if cur, ok := most[name]; !ok || q.Cmp(cur) > 0 {
				most[name] = q
			}
		}
	}
	return out
}

// startingUp reports whether a node still carries one of its group's
// startup taints: its allocatable may not be complete yet.
func startingUp(g *v1alpha1.NodeGroup, n *corev1.Node) bool {
	for _, t := range nodeutil.StartupTaints(g) {
		if slices.ContainsFunc(n.Spec.Taints, func(nt corev1.Taint) bool { return nt.Key == t.Key && nt.Effect == t.Effect }) {
			return true
		}
	}
	return false
}

// effective is what a node of the type is planned with: the declared
// capacity, but a resource the group's nodes have less of (and more than
// none) at what they have, and one the type does not say at what they
// have. Nil observed: the declared capacity itself.
func (o observed) effective(group string, it *v1alpha1.InstanceType) corev1.ResourceList {
	seen := o[typeKey{group: group, instanceType: it.Name}]
	if len(seen) == 0 {
		return it.Capacity
	}
	out := make(corev1.ResourceList, max(len(it.Capacity), len(seen)))
	for name, q := range it.Capacity {
		if s, ok := seen[name]; ok && s.Sign() > 0 && s.Cmp(q) < 0 {
			q = s
		}
		out[name] = q
	}
	for name, s := range seen {
		if _, ok := it.Capacity[name]; !ok && s.Sign() > 0 {
			out[name] = s
		}
	}
	return out
}

// key names what the group's nodes were seen with, for the option cache.
func (o observed) key(group string) string {
	var parts []string
	for k, list := range o {
		if k.group != group {
			continue
		}
		names := make([]string, 0, len(list))
		for name, q := range list {
			names = append(names, string(name)+"="+q.String())
		}
		slices.Sort(names)
		parts = append(parts, k.instanceType+":"+strings.Join(names, ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}
