// Package tenant is the controller of Tenants: for each it creates, in
// order, the tenant's Namespace, its ConfigMap (its type's configuration
// merged with its own), a Deployment of one pod placed on its type's node
// group (tolerations and node selector derived from the group, a node of
// its own when the type is dedicated) and the type's Service, all owned by
// the Tenant so that deleting it deletes them. Its status follows the pod
// and, while the pod waits, carries what berth's provisioner says about it.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/statusupdate"
)

// Name is the controller's name.
const Name = "tenant"

// FieldOwner is the server-side apply field manager of the objects berth
// creates for tenants.
const FieldOwner = "berth-tenant"

// waitingRequeue is how often a tenant whose pod is not Ready is looked at
// again: berth's scale-up events about the pod are read then (events do
// not trigger a reconcile).
const waitingRequeue = 5 * time.Second

// stuckRequeue is how often a tenant that no node can be launched for is
// looked at again: a change of its node group wakes it at once (watched).
const stuckRequeue = time.Minute

// maxEvents bounds how many events about a tenant's pod are read.
const maxEvents = 200

// Reconciler reconciles Tenants.
type Reconciler struct {
	Client client.Client
	// Reader reads from the API server, without a cache: events about the
	// tenant's pending pod (berth does not watch every event), and a
	// namespace or Service before berth takes it as the tenant's.
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
}

// +kubebuilder:rbac:groups=berth.dev,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=berth.dev,resources=tenanttypes;nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list

// Register adds the controller to the manager. Pods are mapped to their
// tenant by label; a TenantType or NodeGroup change reconciles the tenants
// that use it (their pods' template derives from both).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	podsOf := func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[v1alpha1.LabelTenant]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
		}
		return nil
	}
	isTenantPod := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[v1alpha1.LabelTenant] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.Tenant{}).
		Owns(&appsv1.Deployment{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podsOf), builder.WithPredicates(isTenantPod)).
		// Only spec changes matter (a node group's status changes with
		// every node): they change the pods' template.
		Watches(&v1alpha1.TenantType{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfType), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfGroup), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile creates or updates one tenant's objects in order and writes
// its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	t := &v1alpha1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := t.Status.DeepCopy()
	status.ObservedGeneration, status.Namespace = t.Generation, t.TenantNamespace()
	if t.DeletionTimestamp != nil {
		// The garbage collector removes the owned objects; nothing is
		// created again.
		status.Phase = v1alpha1.TenantTerminating
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonTerminating, Message: "the tenant is being deleted with its namespace", ObservedGeneration: t.Generation})
		return reconcile.Result{}, r.writeStatus(ctx, t, status)
	}
	tt, ng, err := r.typeAndGroup(ctx, t, status)
	if err != nil || tt == nil {
		return reconcile.Result{}, errors.Join(err, r.writeStatus(ctx, t, status))
	}
	if taken, err := r.namespaceTaken(ctx, t, status); err != nil || taken {
		// Looked at again: a former tenant's namespace goes away by itself.
		return reconcile.Result{RequeueAfter: waitingRequeue}, errors.Join(err, r.writeStatus(ctx, t, status))
	}
	if err := r.ensureObjects(ctx, t, tt, ng); err != nil {
		// Said on the tenant (a terminating namespace, an object the API
		// server refuses), and retried with backoff.
		failed(t, status, v1alpha1.ReasonApplyFailed, err.Error())
		return reconcile.Result{}, errors.Join(err, r.writeStatus(ctx, t, status))
	}
	o, err := r.observe(ctx, t)
	if err != nil {
		return reconcile.Result{}, err
	}
	podStatus(t, o, status)
	var requeue time.Duration
	switch {
	case status.Phase == v1alpha1.TenantRunning:
	case meta.IsStatusConditionPresentAndEqual(status.Conditions, v1alpha1.ConditionScheduled, metav1.ConditionFalse) &&
		meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionScheduled).Reason == v1alpha1.ReasonNoNodeCanBeLaunched:
		requeue = stuckRequeue // waits for a change of the group (watched), not for a launch
	default:
		requeue = waitingRequeue
	}
	return reconcile.Result{RequeueAfter: requeue}, r.writeStatus(ctx, t, status)
}

// typeAndGroup reads the tenant's type and its node group. When either is
// missing it sets the Failed status and returns a nil type: the tenant is
// reconciled again when they appear.
func (r *Reconciler) typeAndGroup(ctx context.Context, t *v1alpha1.Tenant, status *v1alpha1.TenantStatus) (*v1alpha1.TenantType, *v1alpha1.NodeGroup, error) {
	tt := &v1alpha1.TenantType{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: t.Spec.Type}, tt); apierrors.IsNotFound(err) {
		failed(t, status, v1alpha1.ReasonTypeNotFound, fmt.Sprintf("tenant type %q does not exist (berth tenant types lists them)", t.Spec.Type))
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("reading tenant type %s: %w", t.Spec.Type, err)
	}
	ng := &v1alpha1.NodeGroup{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: tt.Spec.NodeGroup}, ng); apierrors.IsNotFound(err) {
		failed(t, status, v1alpha1.ReasonNodeGroupNotFound, fmt.Sprintf("node group %q of tenant type %s does not exist", tt.Spec.NodeGroup, tt.Name))
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("reading node group %s: %w", tt.Spec.NodeGroup, err)
	}
	return tt, ng, nil
}

// namespaceTaken reports whether the tenant's namespace exists without
// belonging to it, and then sets the Failed status: applying would take
// over a namespace berth did not create, and deleting the tenant would
// delete it with everything in it.
func (r *Reconciler) namespaceTaken(ctx context.Context, t *v1alpha1.Tenant, status *v1alpha1.TenantStatus) (bool, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: t.TenantNamespace()}, ns); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", t.TenantNamespace(), err)
	}
	if ref := metav1.GetControllerOf(ns); ref != nil && ref.UID == t.UID {
		return false, nil
	}
	msg := fmt.Sprintf("namespace %s exists and does not belong to this tenant; berth leaves it alone", ns.Name)
	if ns.DeletionTimestamp != nil {
		msg = fmt.Sprintf("namespace %s of a former tenant of that name is still terminating", ns.Name)
	}
	failed(t, status, v1alpha1.ReasonNamespaceTaken, msg)
	return true, nil
}

// ensureObjects applies, in this order, the Namespace, the ConfigMap, the
// Deployment and the Service (or removes a Service the type no longer
// has): each exists before what refers to it.
func (r *Reconciler) ensureObjects(ctx context.Context, t *v1alpha1.Tenant, tt *v1alpha1.TenantType, ng *v1alpha1.NodeGroup) error {
	if err := r.ensureNamespace(ctx, t); err != nil {
		return err
	}
	config := Config(tt, t)
	objs := []client.Object{namespace(t), configMap(t, config), deployment(t, tt, ng, config)}
	if svc := service(t, tt); svc != nil {
		objs = append(objs, svc)
	}
	for _, o := range objs {
		if err := r.apply(ctx, t, o); err != nil {
			return fmt.Errorf("tenant %s: applying %s %s: %w", t.Name, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	if tt.Spec.Service == nil {
		return r.removeService(ctx, t)
	}
	return nil
}

// ensureNamespace creates the tenant's namespace when it does not exist.
// Applying it would merge berth's owner reference into a namespace of the
// same name that the cache has not shown yet, and deleting the tenant
// would then delete someone else's namespace: it is created, and one that
// already exists is used only if the API server says it is the tenant's.
func (r *Reconciler) ensureNamespace(ctx context.Context, t *v1alpha1.Tenant) error {
	ns := namespace(t)
	if err := controllerutil.SetControllerReference(t, ns, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, ns)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	live := &corev1.Namespace{}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(ns), live); err != nil {
		return fmt.Errorf("reading namespace %s: %w", ns.Name, err)
	}
	if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != t.UID {
		return fmt.Errorf("namespace %s exists and does not belong to tenant %s; berth leaves it alone", ns.Name, t.Name)
	}
	return nil
}

// removeService deletes the tenant's Service, when the type has none any
// more, only if the tenant owns it (precondition on its UID).
func (r *Reconciler) removeService(ctx context.Context, t *v1alpha1.Tenant) error {
	svc := &corev1.Service{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: t.Name, Namespace: t.TenantNamespace()}, svc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := metav1.GetControllerOf(svc); ref == nil || ref.UID != t.UID {
		return nil
	}
	if err := r.Client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("tenant %s: removing its Service: %w", t.Name, err)
	}
	return nil
}

// apply server-side applies obj, owned by the tenant. Applying needs no
// read (berth caches neither ConfigMaps nor Services) and changes nothing
// when nothing changed.
func (r *Reconciler) apply(ctx context.Context, t *v1alpha1.Tenant, obj client.Object) error {
	if err := controllerutil.SetControllerReference(t, obj, r.Client.Scheme()); err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "status")
	return r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// observe finds the tenant's newest live pod, its node's group and, while
// it is pending, berth's latest scale-up event about it.
func (r *Reconciler) observe(ctx context.Context, t *v1alpha1.Tenant) (observed, error) {
	var o observed
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(t.TenantNamespace()), client.MatchingLabels(objectLabels(t))); err != nil {
		return o, fmt.Errorf("listing pods of tenant %s: %w", t.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && (o.pod == nil || o.pod.CreationTimestamp.Before(&p.CreationTimestamp)) {
			o.pod = p
		}
	}
	switch {
	case o.pod == nil:
		// Why the Deployment makes none, as it says (read past the cache:
		// berth caches only the Deployments of berth-system's).
		d := &appsv1.Deployment{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: t.TenantNamespace(), Name: t.Name}, d); client.IgnoreNotFound(err) != nil {
			return o, fmt.Errorf("reading the Deployment of tenant %s: %w", t.Name, err)
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				o.noPod = c.Reason + ": " + c.Message
			}
		}
	case o.pod.Spec.NodeName != "":
		node := &corev1.Node{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: o.pod.Spec.NodeName}, node); client.IgnoreNotFound(err) != nil {
			return o, fmt.Errorf("reading node %s: %w", o.pod.Spec.NodeName, err)
		}
		o.nodeGroup = node.Labels[v1alpha1.LabelNodeGroup]
		if !podReady(o.pod) {
			// The cache keeps no container statuses: why the container
			// waits is read from the API server.
			fresh := &corev1.Pod{}
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(o.pod), fresh); client.IgnoreNotFound(err) != nil {
				return o, fmt.Errorf("reading pod %s of tenant %s: %w", o.pod.Name, t.Name, err)
			}
			for _, cs := range fresh.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && w.Reason != "" {
					o.waiting = strings.TrimSuffix(w.Reason+": "+w.Message, ": ")
				}
			}
		}
	default:
		evs := &eventsv1.EventList{}
		if err := r.Reader.List(ctx, evs, client.InNamespace(t.TenantNamespace()), client.MatchingFields{"regarding.uid": string(o.pod.UID)},
			client.Limit(maxEvents)); err != nil {
			return o, fmt.Errorf("listing events of tenant %s: %w", t.Name, err)
		}
		o.scaleUp = latestScaleUp(o.pod, evs.Items)
	}
	return o, nil
}

// writeStatus writes the status when it changed, and records an event on
// the tenant when its phase or the reason it waits changes.
func (r *Reconciler) writeStatus(ctx context.Context, t *v1alpha1.Tenant, status *v1alpha1.TenantStatus) error {
	if equality.Semantic.DeepEqual(&t.Status, status) {
		return nil
	}
	was := t.DeepCopy()
	t.Status = *status
	written, err := statusupdate.Write(ctx, r.Client, t)
	if err != nil {
		return fmt.Errorf("updating status of tenant %s: %w", t.Name, err)
	}
	if written {
		// Only a transition written: a stale copy's is recorded by the
		// pass that writes it, once.
		r.recordTransition(was, status)
	}
	return nil
}

// recordTransition records an event when the phase or the Ready reason
// changes, and observes how long a tenant took to run.
func (r *Reconciler) recordTransition(t *v1alpha1.Tenant, status *v1alpha1.TenantStatus) {
	was := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady)
	now := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
	if now == nil || (was != nil && was.Reason == now.Reason && t.Status.Phase == status.Phase) {
		return
	}
	typ := corev1.EventTypeNormal
	if status.Phase == v1alpha1.TenantFailed || now.Reason == v1alpha1.ReasonNoNodeCanBeLaunched {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(t, nil, typ, now.Reason, "Reconcile", "%s: %s", status.Phase, now.Message)
	if status.Phase != t.Status.Phase {
		transitions.WithLabelValues(string(status.Phase)).Inc()
		if status.Phase == v1alpha1.TenantRunning && t.Status.Phase != v1alpha1.TenantRunning {
			timeToRunning.Observe(r.Clock.Since(t.CreationTimestamp.Time).Seconds())
		}
	}
}
