package scaleup

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// replacedRoom is what the nodes berth replaces (berth.dev/replaced-by,
// not drained yet) hold for their pods on the nodes launched to replace
// them: a replacement was sized for those pods, and they move there once
// it is up and the old node drains. A pending pod planned into that room
// would leave them none, and the replacement would be given up at its
// drain with its node bought; a pod planned onto the old node would be
// evicted with it. So the old node takes no pod, and the first of its
// replacements in the cluster has the room of the old node's pods that
// move (not DaemonSets', not mirrors') taken off its allocatable, as
// Karpenter schedules the pods of the nodes it deletes with the pending
// ones. The pods are read only when such a node exists.
type replacedRoom struct {
	old  map[string]bool
	into map[string]corev1.ResourceList // by replacement
}

func newReplacedRoom(in Input) *replacedRoom {
	if !slices.ContainsFunc(in.Nodes, func(n *corev1.Node) bool { return n.Annotations[v1alpha1.AnnotationReplacedBy] != "" }) {
		return nil // most rounds: no map of the nodes is made
	}
	byName := make(map[string]*corev1.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	r := &replacedRoom{old: map[string]bool{}, into: map[string]corev1.ResourceList{}}
	to := map[string][]*corev1.Node{} // old node -> its replacements in the cluster
	for _, n := range in.Nodes {
		by := nodeutil.ReplacedBy(n)
		if len(by) == 0 || nodeutil.Disrupted(n) || n.Labels[v1alpha1.LabelNodeGroup] == "" {
			continue // a drained node's pods are evicted: pending pods then
		}
		r.old[n.Name] = true
		for _, name := range by {
			if repl := byName[name]; repl != nil {
				to[n.Name] = append(to[n.Name], repl)
			}
		}
	}
	for _, p := range in.Pods {
		repls := to[p.Spec.NodeName]
		if len(repls) == 0 || podutil.IsDaemonSetPod(p) || podutil.IsMirror(p) || podutil.IsTerminal(p) {
			continue
		}
		req := snapshot.RequestsOf(p)
		repl := repls[0] // a lifecycle replacement of several nodes: the first that holds the pod
		for _, c := range repls {
			if r.holds(c, req) {
				repl = c
				break
			}
		}
		used := r.into[repl.Name]
		if used == nil {
			used = corev1.ResourceList{}
			r.into[repl.Name] = used
		}
		for name, q := range req {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
		pods := used[corev1.ResourcePods]
		pods.Add(*apiresource.NewQuantity(1, apiresource.DecimalSI))
		used[corev1.ResourcePods] = pods
	}
	return r
}

// holds reports whether replacement n has room for req beside what its
// old nodes' pods take there so far.
func (r *replacedRoom) holds(n *corev1.Node, req corev1.ResourceList) bool {
	used := r.into[n.Name]
	for name, q := range req {
		free := n.Status.Allocatable[name].DeepCopy()
		if u, ok := used[name]; ok {
			free.Sub(u)
		}
		if q.Cmp(free) > 0 {
			return false
		}
	}
	return true
}

// apply is n as scale-up plans with it: an old node cordoned, a
// replacement with the room its old nodes' pods take there taken off
// its allocatable, any other node itself.
func (r *replacedRoom) apply(n *corev1.Node) *corev1.Node {
	if r == nil {
		return n
	}
	used, into := r.into[n.Name]
	if !r.old[n.Name] && !into {
		return n
	}
	c := *n
	if r.old[n.Name] {
		c.Spec.Unschedulable = true
	}
	if into {
		c.Status.Allocatable = make(corev1.ResourceList, len(n.Status.Allocatable))
		for name, q := range n.Status.Allocatable {
			q = q.DeepCopy()
			if u, ok := used[name]; ok {
				q.Sub(u)
				if q.Sign() < 0 {
					q = apiresource.Quantity{}
				}
			}
			c.Status.Allocatable[name] = q
		}
	}
	return &c
}
