// Package capacitybuffer serves the upstream CapacityBuffer API
// (autoscaling.x-k8s.io/v1beta1) with berth: it translates each buffer
// into a PodTemplate and a number of chunks in status (condition
// ReadyForProvisioning), which the provisioner keeps as spare capacity
// like headroom units (condition Provisioning).
package capacitybuffer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/notify"
	"github.com/berth-dev/berth/internal/state"
	"github.com/berth-dev/berth/internal/statusupdate"
)

// Name is the controller's name.
const Name = "capacitybuffer"

// Condition reasons.
const (
	ReasonTranslated          = "BufferTranslated"
	ReasonUnsupportedStrategy = "UnsupportedProvisioningStrategy"
	ReasonTemplateNotFound    = "PodTemplateNotFound"
	ReasonScalableNotFound    = "ScalableObjectNotFound"
	ReasonUnsupportedScalable = "UnsupportedScalableKind"
	ReasonNoPodToCopy         = "NoPodToCopy"
	ReasonInvalid             = "InvalidSpec"
	ReasonProvisioning        = "BerthProvisioning"
	ReasonNotProvisioning     = "NotProvisioning"
)

// resync follows the scalable object's replicas.
const resync = 10 * time.Second

// ReadySource tells how many chunks of a buffer fit in free capacity.
type ReadySource interface {
	Get(key string) (int32, bool)
}

// Reconciler reconciles CapacityBuffers.
type Reconciler struct {
	Client  client.Client
	Ready   ReadySource
	changes *notify.Channel
}

// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch;create;update;patch;delete

// Notify asks for a reconcile of a buffer given as "namespace/name"; never
// blocks.
func (r *Reconciler) Notify(namespace, name string) {
	r.changes.Notify(&cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
}

// Register adds the controller to the manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	r.changes = notify.New(256)
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&cbv1beta1.CapacityBuffer{}).
		Owns(&corev1.PodTemplate{}).
		WatchesRawSource(r.changes.Source()).
		Complete(r)
}

// Reconcile translates one buffer.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cb := &cbv1beta1.CapacityBuffer{}
	if err := r.Client.Get(ctx, req.NamespacedName, cb); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := cb.Status.DeepCopy()
	strategy := cbv1beta1.StrategyActiveCapacity
	if cb.Spec.ProvisioningStrategy != nil {
		strategy = *cb.Spec.ProvisioningStrategy
	}
	status.ProvisioningStrategy = &strategy
	if strategy != cbv1beta1.StrategyActiveCapacity {
		// Another autoscaler may serve it; berth leaves it alone.
		r.fail(cb, status, ReasonUnsupportedStrategy, fmt.Sprintf("berth serves only %s, not %q", cbv1beta1.StrategyActiveCapacity, strategy))
		return reconcile.Result{}, r.write(ctx, cb, status)
	}
	ref, generation, replicas, reason, err := r.translate(ctx, cb)
	if err != nil {
		if reason == "" {
			return reconcile.Result{}, err
		}
		r.fail(cb, status, reason, err.Error())
		return reconcile.Result{RequeueAfter: resync}, r.write(ctx, cb, status)
	}
	status.PodTemplateRef, status.PodTemplateGeneration, status.Replicas = ref, &generation, &replicas
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionTrue,
		Reason: ReasonTranslated, Message: fmt.Sprintf("%d chunks of PodTemplate %s", replicas, ref.Name), ObservedGeneration: cb.Generation})
	ready, planned := r.Ready.Get(state.BufferKey(cb.Namespace, cb.Name))
	prov := metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionFalse, Reason: ReasonNotProvisioning,
		Message: "berth has not planned for this buffer yet", ObservedGeneration: cb.Generation}
	if planned {
		prov.Status, prov.Reason = metav1.ConditionTrue, ReasonProvisioning
		prov.Message = fmt.Sprintf("berth keeps %d chunks; %d fit in free capacity now", replicas, min(ready, replicas))
	}
	meta.SetStatusCondition(&status.Conditions, prov)
	return reconcile.Result{RequeueAfter: resync}, r.write(ctx, cb, status)
}

func (r *Reconciler) fail(cb *cbv1beta1.CapacityBuffer, status *cbv1beta1.CapacityBufferStatus, reason, msg string) {
	status.Replicas = nil
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: cb.Generation})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionFalse,
		Reason: ReasonNotProvisioning, Message: "the buffer is not ready for provisioning", ObservedGeneration: cb.Generation})
}

// translate resolves the buffer's pod template and chunk count. A non-empty
// reason marks an error in the buffer (reported in status) rather than a
// failure to talk to the API server.
func (r *Reconciler) translate(ctx context.Context, cb *cbv1beta1.CapacityBuffer) (*cbv1beta1.LocalObjectRef, int64, int32, string, error) {
	sp := &cb.Spec
	if sp.PodTemplateRef != nil {
		pt := &corev1.PodTemplate{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: sp.PodTemplateRef.Name}, pt)
		if apierrors.IsNotFound(err) {
			return nil, 0, 0, ReasonTemplateNotFound, fmt.Errorf("PodTemplate %q not found", sp.PodTemplateRef.Name)
		} else if err != nil {
			return nil, 0, 0, "", err
		}
		n, err := hr.BufferReplicas(sp, nil, pt.Template.Spec)
		if err != nil {
			return nil, 0, 0, ReasonInvalid, err
		}
		return &cbv1beta1.LocalObjectRef{Name: pt.Name}, pt.Generation, n, "", nil
	}
	if sp.ScalableRef == nil {
		return nil, 0, 0, ReasonInvalid, errors.New("set spec.podTemplateRef or spec.scalableRef")
	}
	template, replicas, reason, err := r.scalable(ctx, cb)
	if err != nil {
		return nil, 0, 0, reason, err
	}
	pt, err := r.ownTemplate(ctx, cb, template)
	if err != nil {
		return nil, 0, 0, "", err
	}
	n, err := hr.BufferReplicas(sp, &replicas, template.Spec)
	if err != nil {
		return nil, 0, 0, ReasonInvalid, err
	}
	return &cbv1beta1.LocalObjectRef{Name: pt.Name}, pt.Generation, n, "", nil
}

// ownTemplate keeps a PodTemplate owned by the buffer with the scalable
// object's pod template, so that status.podTemplateRef names it.
func (r *Reconciler) ownTemplate(ctx context.Context, cb *cbv1beta1.CapacityBuffer, template corev1.PodTemplateSpec) (*corev1.PodTemplate, error) {
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: templateName(cb), Namespace: cb.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, pt, func() error {
		pt.Template = template
		return controllerutil.SetControllerReference(cb, pt, r.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("pod template of buffer %s: %w", cb.Name, err)
	}
	return pt, nil
}

// templateName names the PodTemplate berth keeps for a scalableRef buffer.
func templateName(cb *cbv1beta1.CapacityBuffer) string { return "capacitybuffer-" + cb.Name }

func (r *Reconciler) write(ctx context.Context, cb *cbv1beta1.CapacityBuffer, status *cbv1beta1.CapacityBufferStatus) error {
	if equality.Semantic.DeepEqual(&cb.Status, status) {
		return nil
	}
	cb.Status = *status
	if err := statusupdate.Update(ctx, r.Client, cb); err != nil {
		return fmt.Errorf("updating status of buffer %s/%s: %w", cb.Namespace, cb.Name, err)
	}
	return nil
}
