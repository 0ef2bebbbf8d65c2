// Package reserve decides where a burst-critical pod takes a per-node
// reserve slice: a node whose reserve pod, once removed, leaves room for
// it. The scheduler cannot do this itself: its preemption evicts the
// lowest-priority pods of a node, i.e. ordinary workload rather than the
// reserve, so berth hands the slice over explicitly. Pure: values in, a
// decision out.
package reserve

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Input is the cluster and the pod that wants a reserve slice.
type Input struct {
	Nodes []*corev1.Node
	Pods  []*corev1.Pod // bound pods
	// Nominated are unbound pods waiting for the node in their
	// status.nominatedNodeName (e.g. burst-critical pods handed a slice a
	// moment ago). Those of the pod's priority or higher hold their room
	// there, as kube-scheduler counts them, so that two pods are never
	// handed the same slice.
	Nominated  []*corev1.Pod
	Namespaces []*corev1.Namespace
	// Claims, Volumes and DRA are the cluster's PersistentVolumeClaims,
	// PersistentVolumes and dynamic resource allocation objects: a pod's
	// volumes and device claims are resolved as the scheduler resolves
	// them (without them, a pod with a claim fits no node).
	Claims  []*corev1.PersistentVolumeClaim
	Volumes []*corev1.PersistentVolume
	DRA     snapshot.DRA
	Pod     *corev1.Pod
	// IsReserve tells reserve pods.
	IsReserve func(*corev1.Pod) bool
}

// Decision is the node to use and the reserve pod to remove there.
type Decision struct {
	Node    string
	Reserve *corev1.Pod
}

// Choose returns the first node (by name) where the pod fits after that
// node's reserve pod is removed, or an error saying why there is none.
func Choose(in Input) (*Decision, error) {
	sin := snapshot.Input{Pods: append(slices.Clip(in.Pods), holding(in)...), Namespaces: in.Namespaces,
		Claims: in.Claims, Volumes: in.Volumes, DRA: in.DRA}
	for _, n := range in.Nodes {
		sin.Nodes = append(sin.Nodes, snapshot.NodeInput{Node: n})
	}
	s, err := snapshot.New(sin)
	if err != nil {
		return nil, err
	}
	c, err := s.Classify(in.Pod)
	if err != nil {
		return nil, err
	}
	s.Prepare(c)
	nodes := append([]*snapshot.Node(nil), s.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	filters := predicates.Default()
	reserves := 0
	for _, n := range nodes {
		for _, p := range n.Pods {
			if !in.IsReserve(p.Pod) || p.DeletionTimestamp != nil {
				continue
			}
			reserves++
			fits := false
			_ = s.WithFork(func() (bool, error) {
				s.RemovePod(p)
				fits = !predicates.Run(filters, s, c, n).Failed()
				return false, nil // a trial: the reserve is still there
			})
			if fits {
				return &Decision{Node: n.Name, Reserve: p.Pod}, nil
			}
		}
	}
	if reserves == 0 {
		return nil, fmt.Errorf("no node holds a per-node reserve")
	}
	return nil, fmt.Errorf("the pod does not fit on any of the %d nodes with a reserve, even with the reserve removed", reserves)
}

// holding returns the nominated pods that keep their room from in.Pod, as
// if bound to their nominated node.
func holding(in Input) []*corev1.Pod {
	prio := corev1helpers.PodPriority(in.Pod)
	var out []*corev1.Pod
	for _, p := range in.Nominated {
		if p.Namespace == in.Pod.Namespace && p.Name == in.Pod.Name || corev1helpers.PodPriority(p) < prio {
			continue
		}
		out = append(out, podutil.HeldOn(p, p.Status.NominatedNodeName))
	}
	return out
}
