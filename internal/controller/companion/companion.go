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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
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
)

// Annotations on placeholders: the workload ("namespace/name") and profile
// they hold room for.
const (
	annotationWorkload = "berth.dev/companion-workload"
	annotationProfile  = "berth.dev/companion-profile"
)

// holdAfterRunning is how long a placeholder outlives its workload's start
// when no companion comes (the driver may have shared one berth did not
// know of).
const holdAfterRunning = 2 * time.Minute

// recheck is how often a gated workload or a placeholder is looked at
// again while nothing about it changes.
const recheck = 2 * time.Second

// Reconciler runs the companion life cycle for one pod at a time: a gated
// workload, a placeholder or a companion.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// PauseImage runs in placeholders.
	PauseImage string
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=pods,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes;namespaces;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=companionprofiles,verbs=get;list;watch

// Register adds the controller to the manager; it looks at gated
// workloads, berth's placeholders and pods some profile recognises as
// companions (decided in Reconcile: the predicate only drops pods that
// are bound and carry none of berth's marks and are not pending).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			p, ok := o.(*corev1.Pod)
			return ok && relevant(p)
		}))).
		Complete(r)
}

// relevant: a pod with berth's gate, a placeholder, or a pod that is not
// running yet (it may be a companion that needs its room).
func relevant(p *corev1.Pod) bool {
	return companion.Gated(p) || isPlaceholder(p) || (p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending) ||
		p.Labels[v1alpha1.LabelCompanionFor] != ""
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
	case pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil:
		return r.maybeCompanion(ctx, pod)
	}
	return reconcile.Result{}, nil
}

// profiles lists the CompanionProfiles.
func (r *Reconciler) profiles(ctx context.Context) ([]v1alpha1.CompanionProfile, error) {
	l := &v1alpha1.CompanionProfileList{}
	if err := r.Client.List(ctx, l); err != nil {
		return nil, err
	}
	return l.Items, nil
}
