package companion

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// roomRecheck is how soon a workload whose node is full for the moment is
// looked at again: a hand-over frees the room within a second or so.
const roomRecheck = 500 * time.Millisecond

// nodeHasRoom reports whether w, plus extra (its companion's room when it
// holds it), fits on n now as kube-scheduler counts n for w — the pods
// bound to n and the pods nominated to n that are not gated and have at
// least w's priority — and with the room promised on n to companions
// that are not bound yet: berth's placeholders waiting for their
// workloads there, and companions pinned there that a profile recognises
// (waiting for their hand-over). Any other pod pinned to n that is not
// bound (unschedulable, say) takes nothing: it is not a companion of n's
// workloads. It decides only when to ungate, never where a pod goes (the
// planner did that): ungated while a companion and the placeholder it has
// not handed over yet both take a slice of n, w would find its nominated
// node full and be bound elsewhere, away from its companion's room.
func (r *Reconciler) nodeHasRoom(ctx context.Context, n *corev1.Node, w *corev1.Pod, extra corev1.ResourceList, profiles []v1alpha1.CompanionProfile) (bool, string, error) {
	pods := &corev1.PodList{}
	// Read only: the cache's objects are not copied. Through the index,
	// only the pods bound, nominated or pinned to n (a list of every pod
	// copies each pod's struct into the list: 1.2 KB a pod, twice a
	// second per workload waiting for room).
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if r.indexed {
		opts = append(opts, client.MatchingFields{podNodeIndex: n.Name})
	}
	if err := r.Client.List(ctx, pods, opts...); err != nil {
		return false, "", fmt.Errorf("listing pods to see the room on node %s: %w", n.Name, err)
	}
	prio := corev1helpers.PodPriority(w)
	var used snapshot.Resources
	for i := range pods.Items {
		o := &pods.Items[i]
		if o.UID == w.UID || podutil.IsTerminal(o) {
			continue
		}
		bound := o.Spec.NodeName == n.Name
		pending := o.Spec.NodeName == "" && o.DeletionTimestamp == nil
		nominated := pending && o.Status.NominatedNodeName == n.Name && len(o.Spec.SchedulingGates) == 0 && corev1helpers.PodPriority(o) >= prio
		pinned := pending && companion.PinnedNode(o) == n.Name && promised(o, n.Name, profiles)
		if bound || nominated || pinned {
			req := snapshot.FromList(snapshot.RequestsOf(o))
			used.Add(&req)
		}
	}
	need := snapshot.FromList(resource.PodRequests(w, resource.PodResourcesOptions{}))
	add := snapshot.FromList(extra)
	need.Add(&add)
	alloc := snapshot.FromList(n.Status.Allocatable)
	if short := snapshot.Shortfalls(&need, &used, &alloc); len(short) > 0 {
		return false, fmt.Sprintf("node %s is full for the moment: %v", n.Name, short), nil
	}
	return true, "", nil
}

// promised: o, a pod pinned to node and not bound yet, is one berth
// counts room for there: a placeholder of node, or a companion some
// profile recognises.
func promised(o *corev1.Pod, node string, profiles []v1alpha1.CompanionProfile) bool {
	if isPlaceholder(o) {
		return o.Annotations[v1alpha1.AnnotationCompanionNode] == node
	}
	return companion.RecognizedByAny(profiles, o)
}
