// Package companion runs the life cycle of companion headroom: a workload
// pod that berth's webhook gated (CompanionProfile) is annotated with its
// companion's size and share key, planned by the provisioning round with
// room for the companion (nominatedNodeName), given a placeholder on that
// node that holds the companion's room (unless the node already has the
// share key), and ungated. When the companion appears on the node, its
// placeholder is deleted so that it fits and no other pod is preempted.
// Placeholders go when the companion runs, the workload is gone, or the
// workload has run for a while without one. A gate is never held longer
// than the profile's ungateAfter, whatever happens, across restarts.
package companion

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// Name is the controller's name.
const Name = "companion"

// Event reasons.
const (
	ReasonGated    = "CompanionHeadroomGated"
	ReasonHeld     = "CompanionHeadroomHeld"
	ReasonShared   = "CompanionHeadroomShared"
	ReasonSkipped  = "CompanionHeadroomSkipped"
	ReasonArrived  = "CompanionArrived"
	ReasonHandover = "CompanionHeadroomHandedOver"
	// ReasonProfileInvalid is on a CompanionProfile berth applies to no
	// pod (companion.Validate).
	ReasonProfileInvalid = "CompanionProfileInvalid"
)

// annotationWorkload on a placeholder is the workload ("namespace/name")
// it holds room for.
const annotationWorkload = "berth.dev/companion-workload"

// holdAfterRunning is how long a placeholder outlives its workload's start
// when no companion comes (the driver may have shared one berth did not
// know of).
const holdAfterRunning = 2 * time.Minute

// recheck is how often a gated workload is looked at again while nothing
// about it changes (its nomination and its node's readiness are watched;
// the deadline is kept exactly).
const recheck = 5 * time.Second

// Reconciler runs the companion life cycle of a pod: a gated workload, a
// placeholder or a companion. Both controllers share it (and its memory
// of recent hand-overs).
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// PauseImage runs in placeholders.
	PauseImage string
	// APIReader reads from the API server, past the cache, where a
	// moment's lag matters (a placeholder just created); nil: Client.
	APIReader client.Reader

	claims claims
	// handover serialises, per node, choosing which placeholder a
	// companion takes (reconciles run concurrently).
	handover nodeLocks
	// indexed: Client's cache indexes pods by the nodes they take room
	// on (podNodeIndex; Register adds it), so the room on a node is read
	// from that node's pods, not from a list of every pod.
	indexed bool
}

// podNodeIndex indexes the cache's pods by the nodes whose room they
// take (podNodes).
const podNodeIndex = "berth.dev/companion-room-node"

// podNodes are the nodes whose room a pod takes or may take, as
// nodeHasRoom counts it: the node it is bound to, the node it is
// nominated to and the node it is pinned to (each once).
func podNodes(obj client.Object) []string {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	var out []string
	for _, n := range []string{p.Spec.NodeName, p.Status.NominatedNodeName, companion.PinnedNode(p)} {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// nodeLocks serialises work per node name with a fixed set of mutexes
// (nodes hash onto them), so its size does not grow with node churn.
type nodeLocks struct {
	stripes [64]sync.Mutex
}

// lock locks node's mutex and returns the function that unlocks it.
func (l *nodeLocks) lock(node string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	m := &l.stripes[h.Sum32()%uint32(len(l.stripes))]
	m.Lock()
	return m.Unlock
}

// workers is how many pods each controller looks at at once: a gated
// workload is ungated as soon as its node takes pods, because until then
// kube-scheduler does not count its nomination and gives its room to
// others (gated pods are not in its nominator).
const workers = 8

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=pods,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes;namespaces;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=companionprofiles,verbs=get;list;watch

// Register adds two controllers to the manager, with one workqueue each,
// so that a burst of gated workloads never delays a hand-over:
//   - companion: gated workloads (annotate, hold, ungate), also the moment
//     their nominated node takes pods (a Node watch);
//   - companion-room: berth's placeholders and pods that may be companions
//     (a pod is looked at when it appears and when it is bound; the
//     profiles decide in Reconcile whether it is one).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podNodeIndex, podNodes); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	r.indexed = true
	gate := podPredicate(companion.Gated)
	err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// A failed pass is retried within recheck, however often it failed,
		// so that a gate's deadline is kept even while a step keeps failing.
		WithOptions(controller.Options{MaxConcurrentReconciles: workers,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, recheck)}).
		For(&corev1.Pod{}, builder.WithPredicates(gate)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.gatedOnNode), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return true },
			UpdateFunc:  func(e event.UpdateEvent) bool { return takesPodsChanged(e.ObjectOld, e.ObjectNew) },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name+"-room").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&corev1.Pod{}, builder.WithPredicates(podPredicate(roomRelevant))).
		Complete(r)
}

// podPredicate passes pod events for which f holds, before or after an
// update.
func podPredicate(f func(*corev1.Pod) bool) predicate.Funcs {
	is := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && f(p)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return is(e.ObjectOld) || is(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return is(e.Object) },
	}
}

// roomRelevant: a placeholder, or a pod that is not gated by berth and
// does not run yet (it may be a companion that needs its room).
func roomRelevant(p *corev1.Pod) bool {
	return isPlaceholder(p) || (!companion.Gated(p) && p.Status.Phase == corev1.PodPending)
}

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// takesPodsChanged: what decides whether a node takes a workload changed
// (readiness, taints, cordon), not just a heartbeat.
func takesPodsChanged(oldObj, newObj client.Object) bool {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	return ok1 && ok2 && (nodeutil.Ready(o) != nodeutil.Ready(n) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints))
}

// gatedOnNode returns the gated workloads nominated to node, to look at
// them the moment it may take them rather than at their next recheck.
func (r *Reconciler) gatedOnNode(ctx context.Context, node client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	opts := []client.ListOption{client.HasLabels{v1alpha1.LabelCompanionFor}}
	if r.indexed {
		opts = append(opts, client.MatchingFields{podNodeIndex: node.GetName()})
	}
	if err := r.Client.List(ctx, pods, opts...); err != nil {
		log.FromContext(ctx).Error(err, "listing gated workloads for a node that takes pods now", "node", node.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.NominatedNodeName == node.GetName() && companion.Gated(p) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}

func isPlaceholder(p *corev1.Pod) bool {
	return p.Namespace == v1alpha1.SystemNamespace && p.Labels[v1alpha1.LabelHeadroomRole] == v1alpha1.HeadroomRoleCompanion
}

// Reconcile dispatches on what the pod is.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case isPlaceholder(pod):
		return r.placeholder(ctx, pod)
	case companion.Gated(pod):
		return r.gated(ctx, pod)
	default:
		return r.maybeCompanion(ctx, pod)
	}
}

// profiles lists the CompanionProfiles.
func (r *Reconciler) profiles(ctx context.Context) ([]v1alpha1.CompanionProfile, error) {
	l := &v1alpha1.CompanionProfileList{}
	if err := r.Client.List(ctx, l); err != nil {
		return nil, err
	}
	return l.Items, nil
}
