package companion

import (
	"context"
	"encoding/json"
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
// least w's priority — and with the room promised to the pods pinned to
// n that are not bound yet (placeholders waiting for their workloads,
// companions waiting for their hand-over). It decides only when to ungate, never where a pod
// goes (the planner did that): ungated while a companion and the
// placeholder it has not handed over yet both take a slice of n, w would
// find its nominated node full and the scheduler would bind it wherever
// there is room, away from its companion's (seen in a burst of 200).
func (r *Reconciler) nodeHasRoom(ctx context.Context, n *corev1.Node, w *corev1.Pod, extra corev1.ResourceList) (bool, string, error) {
	pods := &corev1.PodList{}
	// Read only: the cache's objects are not copied.
	if err := r.Client.List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
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
		pinned := pending && companion.PinnedNode(o) == n.Name
		if bound || nominated || pinned {
			req := snapshot.FromList(resource.PodRequests(o, resource.PodResourcesOptions{}))
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

// companionRequests reads the companion's requests berth wrote on w.
func companionRequests(w *corev1.Pod) (corev1.ResourceList, error) {
	var req corev1.ResourceList
	if err := json.Unmarshal([]byte(w.Annotations[v1alpha1.AnnotationCompanionRequests]), &req); err != nil {
		return nil, fmt.Errorf("reading the companion requests of %s/%s: %w", w.Namespace, w.Name, err)
	}
	return req, nil
}
