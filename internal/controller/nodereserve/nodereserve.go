// Package nodereserve hands a per-node reserve slice to a burst-critical
// pod: when such a pod cannot be scheduled, it deletes the reserve pod of a
// node where the pod then fits and nominates that node, so the pod runs at
// once. The scheduler cannot do it: its preemption would evict the node's
// ordinary pods (the lowest priority) and keep the reserve. Reserve and
// burst-critical pods never preempt (preemptionPolicy Never), so neither
// evicts workload; a reserve pod whose slice was taken waits until it is
// free again.
package nodereserve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/planner/reserve"
)

// Name is the controller's name.
const Name = "nodereserve"

// Event reasons.
const (
	ReasonUsingReserve  = "UsingNodeReserve"
	ReasonNoReserveFits = "NoNodeReserveFits"
)

// Reconciler hands reserve slices to burst-critical pods.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// said is the last "no slice fits" message per waiting pod, said once.
	said sync.Map
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=pods,verbs=delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes;namespaces;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch

// Register adds the controller to the manager; it only looks at
// burst-critical pods that are not bound.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			p, ok := o.(*corev1.Pod)
			return ok && waiting(p)
		}))).
		// A slice that comes (a reserve pod running: a new node's, or one
		// back after its node was full) is offered to the pods that wait:
		// no event of theirs would tell them.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.WaitingPods), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return reserveRunning(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return !reserveRunning(e.ObjectOld) && reserveRunning(e.ObjectNew) },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
}

// reserveRunning reports whether o is a per-node reserve pod that runs.
func reserveRunning(o client.Object) bool {
	p, ok := o.(*corev1.Pod)
	return ok && p.Namespace == v1alpha1.SystemNamespace && p.Labels[v1alpha1.LabelHeadroomRole] == hr.RoleNodeReserve &&
		p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
}

// WaitingPods are the burst-critical pods that wait for a slice, to be
// looked at again when one comes.
func (r *Reconciler) WaitingPods(ctx context.Context, _ client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing the burst-critical pods that wait for a reserve slice")
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		if p := &pods.Items[i]; waiting(p) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}

// waiting: a burst-critical pod the scheduler could not place and nobody
// has nominated a node for.
func waiting(p *corev1.Pod) bool {
	if p.Spec.PriorityClassName != v1alpha1.PriorityClassBurstCritical || p.Spec.NodeName != "" ||
		p.DeletionTimestamp != nil || p.Status.NominatedNodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Reconcile gives one waiting burst-critical pod a reserve slice.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		r.said.Delete(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !waiting(pod) {
		r.said.Delete(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	in, err := r.input(ctx, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	d, err := reserve.Choose(in)
	if err != nil {
		if last, _ := r.said.Swap(req.NamespacedName, err.Error()); last != err.Error() {
			r.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonNoReserveFits, "Reserve", "No per-node reserve slice fits this pod: %v", err)
		}
		return reconcile.Result{}, nil // looked at again when a slice comes (WaitingPods)
	}
	r.said.Delete(req.NamespacedName)
	// Nominate first, so that the slice is the pod's as soon as the
	// reserve pod is gone.
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Status.NominatedNodeName = d.Node
	if err := r.Client.Status().Patch(ctx, pod, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("nominating %s for %s: %w", d.Node, req, err)
	}
	if err := r.Client.Delete(ctx, d.Reserve, client.GracePeriodSeconds(0)); err != nil {
		// The slice is not the pod's: its nomination is taken back, so
		// that the pod waits again and a retry chooses anew (nominated, it
		// would not be looked at again, and nothing would clear a
		// nomination of a pod that never preempts). Gone already: another
		// pod took this reserve a moment ago, which the cache had not
		// shown.
		if uerr := r.unnominate(ctx, pod, d.Node); uerr != nil {
			return reconcile.Result{}, errors.Join(fmt.Errorf("deleting reserve pod %s: %w", d.Reserve.Name, err), uerr)
		}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, fmt.Errorf("deleting reserve pod %s: %w", d.Reserve.Name, err)
	}
	log.FromContext(ctx).Info("handed a node reserve to a burst-critical pod", "pod", req.String(), "node", d.Node, "reservePod", d.Reserve.Name)
	r.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonUsingReserve, "Reserve",
		"Taking the per-node reserve slice of node %s (reserve pod %s removed)", d.Node, d.Reserve.Name)
	return reconcile.Result{}, nil
}

// unnominate takes back the pod's nomination to node, if it still has it;
// a conflict (the scheduler wrote the pod meanwhile) reads it again.
func (r *Reconciler) unnominate(ctx context.Context, pod *corev1.Pod, node string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if pod.Status.NominatedNodeName != node {
			return nil
		}
		patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
		pod.Status.NominatedNodeName = ""
		err := r.Client.Status().Patch(ctx, pod, patch)
		if apierrors.IsConflict(err) {
			if gerr := r.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); gerr != nil {
				return gerr
			}
		}
		return err
	})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("taking back the nomination of %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
	}
	return nil
}

func (r *Reconciler) input(ctx context.Context, pod *corev1.Pod) (reserve.Input, error) {
	in := reserve.Input{Pod: pod, IsReserve: func(p *corev1.Pod) bool {
		return p.Labels[v1alpha1.LabelHeadroomRole] == hr.RoleNodeReserve && p.Namespace == v1alpha1.SystemNamespace
	}}
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	nss := &corev1.NamespaceList{}
	pvcs := &corev1.PersistentVolumeClaimList{}
	pvs := &corev1.PersistentVolumeList{}
	for _, l := range []client.ObjectList{nodes, pods, nss, pvcs, pvs} {
		// Read only (reserve.Choose is pure): the cache's objects are
		// not copied.
		if err := r.Client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return in, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		switch p := &pods.Items[i]; {
		case p.Spec.NodeName != "":
			in.Pods = append(in.Pods, p)
		case p.Status.NominatedNodeName != "":
			in.Nominated = append(in.Nominated, p)
		}
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	for i := range pvcs.Items {
		in.Claims = append(in.Claims, &pvcs.Items[i])
	}
	for i := range pvs.Items {
		in.Volumes = append(in.Volumes, &pvs.Items[i])
	}
	dra, err := clusterread.DRA(ctx, r.Client)
	if err != nil {
		return in, err
	}
	in.DRA = dra
	return in, nil
}
