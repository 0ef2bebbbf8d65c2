package snapshot

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/nodeutil"
)

// baseNode is a node of the base and what the base read of it: its own
// copies, since a caller's copy of a node may change after the round.
type baseNode struct {
	n       *Node
	rv      string
	group   string
	labels  map[string]string
	ignore  []corev1.Taint
	taints  []corev1.Taint
	unsched bool
	ready   bool
	ports   []HostPort
	gen     uint64
}

func newBaseNode(ni NodeInput, n *Node, gen uint64) *baseNode {
	return &baseNode{n: n, rv: ni.Node.ResourceVersion, group: ni.NodeGroup, labels: maps.Clone(ni.Node.Labels),
		ignore: slices.Clone(ni.IgnoreTaints), taints: slices.Clone(ni.Node.Spec.Taints), unsched: unschedulable(ni.Node),
		ready: nodeutil.Ready(ni.Node), ports: slices.Clone(ni.HostPorts), gen: gen}
}

// same reports whether ni is the node the base holds, read the same way:
// the same object at the same version, or an object equal in all the
// base reads (a kubelet's status heartbeat changes none of it).
func (e *baseNode) same(ni NodeInput) bool {
	o := ni.Node
	if e.group != ni.NodeGroup || !taintsEqual(e.ignore, ni.IgnoreTaints) || !slices.Equal(e.ports, ni.HostPorts) {
		return false
	}
	if e.n.Node == o && e.rv == o.ResourceVersion {
		return true
	}
	if e.unsched != unschedulable(o) || e.ready != nodeutil.Ready(o) || !taintsEqual(e.taints, o.Spec.Taints) || !maps.Equal(e.labels, o.Labels) ||
		e.n.AllowedPods != int(o.Status.Allocatable.Pods().Value()) {
		return false
	}
	alloc, capacity := FromList(o.Status.Allocatable), FromList(o.Status.Capacity)
	return resourcesEqual(&alloc, &e.n.Allocatable) && resourcesEqual(&capacity, &e.n.Capacity)
}

func resourcesEqual(a, b *Resources) bool {
	return a.MilliCPU == b.MilliCPU && a.Memory == b.Memory && a.EphemeralStorage == b.EphemeralStorage && maps.Equal(a.Scalar, b.Scalar)
}

func taintsEqual(a, b []corev1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
	})
}

// baseEnv is what the base read besides the nodes and pods: namespaces
// (namespace selectors), claims and volumes (a bound volume's node
// affinity, in a class), the option keys.
type baseEnv struct {
	namespaces, claims, volumes map[types.NamespacedName]objectVersion
	optionKeys                  []string
}

// objectVersion identifies a version of an object: its resourceVersion,
// or, for an object without one, the object itself.
type objectVersion struct {
	rv  string
	obj any
}

func (v objectVersion) same(o objectVersion) bool {
	if v.rv != "" {
		return v.rv == o.rv
	}
	return v.obj == o.obj
}

func newBaseEnv(in Input) baseEnv {
	return baseEnv{namespaces: versions(in.Namespaces), claims: versions(in.Claims), volumes: versions(in.Volumes), optionKeys: in.OptionKeys}
}

type versioned interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}

func versions[T versioned](objs []T) map[types.NamespacedName]objectVersion {
	out := make(map[types.NamespacedName]objectVersion, len(objs))
	for _, o := range objs {
		out[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = objectVersion{rv: o.GetResourceVersion(), obj: o}
	}
	return out
}

// shapesClasses reports whether what the base's classes were derived
// from is the same in both: claims, volumes and option keys (a change
// there means building the base anew). Namespaces are followed instead
// (followNamespaces).
func (e baseEnv) shapesClasses(o baseEnv) bool {
	return sameVersions(e.claims, o.claims) && sameVersions(e.volumes, o.volumes) && slices.Equal(e.optionKeys, o.optionKeys)
}

func sameVersions(a, b map[types.NamespacedName]objectVersion) bool {
	return maps.EqualFunc(a, b, objectVersion.same)
}

// followNamespaces gives the base the namespaces of in when they changed.
// Only what is worked out per round reads their labels (pod affinity's
// namespace selectors, in counters a round registers), and the lists of
// blocking anti-affinity terms classes cache, which are dropped here: a
// namespace created or relabelled needs no new base.
func (b *Base) followNamespaces(in Input, env baseEnv) {
	if sameVersions(b.env.namespaces, env.namespaces) {
		return
	}
	s := b.s
	clear(s.namespaces)
	for _, ns := range in.Namespaces {
		s.namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	for _, c := range s.classList {
		c.blocking, c.blockingSeen = nil, 0
	}
}
