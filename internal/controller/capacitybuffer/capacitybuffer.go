// Package capacitybuffer serves the upstream CapacityBuffer API
// (autoscaling.x-k8s.io/v1beta1) with berth: it translates each buffer
// into a PodTemplate and a number of chunks in status (condition
// ReadyForProvisioning), which the provisioner keeps as spare capacity
// like headroom units (condition Provisioning).
package capacitybuffer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
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
	ReasonTemplateNotFound    = "PodTemplateNotFound"
	ReasonBufferIsEmpty       = "BufferIsEmpty"
	ReasonScalableNotFound    = "ScalableObjectNotFound"
	ReasonUnsupportedScalable = "UnsupportedScalableKind"
	ReasonNoPodToCopy         = "NoPodToCopy"
	ReasonInvalid             = "InvalidSpec"
	ReasonProvisioning        = "BerthProvisioning"
	ReasonStandby             = "StandbyNodes"
	ReasonStandbyMissing      = "StandbyNodesMissing"
	ReasonNotProvisioning     = "NotProvisioning"
	// ReasonChunksCut is the event reason when berth keeps fewer chunks
	// than a buffer asks for.
	ReasonChunksCut = "ChunksCut"
)

// resync follows the scalable object's replicas.
const resync = 10 * time.Second

// ReadySource tells how many chunks of a buffer fit in free capacity.
type ReadySource interface {
	Get(key state.Key) (int32, bool)
}

// Reconciler reconciles CapacityBuffers.
type Reconciler struct {
	Client client.Client
	// PodReader reads the pods whose shape a chunk copies (a scalable
	// object other than a Deployment, StatefulSet, ReplicaSet or Job) past
	// the manager's cache: the cache keeps only what the planners read of a
	// pod (no images, environment or mounts), and the copy must be a pod
	// the API server accepts.
	PodReader client.Reader
	Ready     ReadySource
	// Standby tells how the standby controller keeps a standby buffer.
	Standby  StandbySource
	Recorder events.EventRecorder
	changes  *notify.Channel
}

// StandbySource tells the state of a standby buffer's standby nodes.
type StandbySource interface {
	Get(key state.Key) (v1alpha1.StandbyStatus, bool)
}

// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch

// Notify asks for a reconcile of a buffer given as "namespace/name"; never
// blocks.
func (r *Reconciler) Notify(namespace, name string) {
	if r.changes == nil { // not registered with a manager
		return
	}
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
	if s := cb.Spec.ProvisioningStrategy; s != nil && *s != "" { // empty: the default, as Cluster Autoscaler reads it
		strategy = *s
	}
	if strategy != cbv1beta1.StrategyActiveCapacity && strategy != cbv1beta1.StrategyStandbyCapacity {
		// Another autoscaler may serve it: berth writes nothing to it (its
		// status is that autoscaler's) and plans none of it (Units).
		log.FromContext(ctx).V(1).Info("leaving a buffer of a strategy berth does not serve", "buffer", req.NamespacedName, "strategy", strategy)
		return reconcile.Result{}, nil
	}
	status.ProvisioningStrategy = &strategy
	tr, err := r.translate(ctx, cb)
	var bad *specError
	if errors.As(err, &bad) {
		r.fail(cb, status, bad.reason, bad.Error())
		return reconcile.Result{RequeueAfter: resync}, r.write(ctx, cb, status)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if tr.cut != "" && !sameCut(cb, tr) {
		r.Recorder.Eventf(cb, nil, corev1.EventTypeWarning, ReasonChunksCut, "Translate", "%s", tr.cut)
	}
	changed := cb.Status.Replicas == nil || *cb.Status.Replicas != tr.replicas
	status.PodTemplateRef, status.PodTemplateGeneration, status.Replicas = tr.ref, &tr.generation, &tr.replicas
	msg := fmt.Sprintf("%d chunks of PodTemplate %s", tr.replicas, tr.ref.Name)
	if tr.cut != "" {
		msg += " (" + tr.cut + ")"
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionTrue,
		Reason: ReasonTranslated, Message: msg, ObservedGeneration: cb.Generation})
	if tr.quotaCut != nil {
		meta.SetStatusCondition(&status.Conditions, *tr.quotaCut)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, cbv1beta1.ConditionLimitedByQuotas)
	}
	if strategy == cbv1beta1.StrategyStandbyCapacity {
		r.setStandby(cb, status, tr.replicas)
	} else {
		r.setProvisioning(cb, status, tr.replicas)
	}
	if err := r.write(ctx, cb, status); err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		// What it keeps of the quota changed: the younger buffers share
		// what is left, and learn it now (once it is written), not at
		// their resync.
		for _, name := range tr.younger {
			r.Notify(cb.Namespace, name)
		}
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// setProvisioning sets the Provisioning condition from the provisioner's
// latest plan. Until the provisioner has planned once since berth started,
// the condition is left as it is: saying "not provisioning" for the few
// seconds after a restart would be false, and flap.
func (r *Reconciler) setProvisioning(cb *cbv1beta1.CapacityBuffer, status *cbv1beta1.CapacityBufferStatus, replicas int32) {
	if replicas == 0 {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionFalse,
			Reason: ReasonBufferIsEmpty, Message: "the buffer asks for no chunk", ObservedGeneration: cb.Generation})
		return
	}
	ready, planned := r.Ready.Get(state.BufferKey(cb.Namespace, cb.Name))
	if !planned {
		if meta.FindStatusCondition(status.Conditions, cbv1beta1.ConditionProvisioning) == nil {
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionFalse,
				Reason: ReasonNotProvisioning, Message: "berth has not planned for this buffer yet", ObservedGeneration: cb.Generation})
		}
		return
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionTrue,
		Reason: ReasonProvisioning, Message: fmt.Sprintf("berth keeps %d chunks; %d fit in free capacity now", replicas, min(ready, replicas)),
		ObservedGeneration: cb.Generation})
}

// setStandby sets the Provisioning condition of a standby buffer from
// the standby controller's account of its standby nodes.
func (r *Reconciler) setStandby(cb *cbv1beta1.CapacityBuffer, status *cbv1beta1.CapacityBufferStatus, replicas int32) {
	c := metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionFalse, Reason: ReasonNotProvisioning,
		Message: "the standby controller has not looked at this buffer yet", ObservedGeneration: cb.Generation}
	if r.Standby != nil {
		if st, ok := r.Standby.Get(state.BufferKey(cb.Namespace, cb.Name)); ok {
			c.Reason, c.Message = ReasonStandbyMissing, fmt.Sprintf("%d of %d chunks on standby nodes: %s", min(st.Units, replicas), replicas, st.Message)
			if st.Units >= replicas {
				c.Status, c.Reason = metav1.ConditionTrue, ReasonStandby
			}
		}
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

// fail marks the buffer not ready: its translation (replicas, pod
// template and its generation) is cleared, as Cluster Autoscaler clears
// it, so that the status names no template the buffer no longer uses.
func (r *Reconciler) fail(cb *cbv1beta1.CapacityBuffer, status *cbv1beta1.CapacityBufferStatus, reason, msg string) {
	status.Replicas, status.PodTemplateRef, status.PodTemplateGeneration = nil, nil, nil
	meta.RemoveStatusCondition(&status.Conditions, cbv1beta1.ConditionLimitedByQuotas)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: cb.Generation})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cbv1beta1.ConditionProvisioning, Status: metav1.ConditionFalse,
		Reason: ReasonNotProvisioning, Message: "the buffer is not ready for provisioning", ObservedGeneration: cb.Generation})
}

// specError is a problem with the buffer itself, reported in its status
// with a reason, as opposed to a failure to talk to the API server, which
// is retried. Read it with errors.As.
type specError struct {
	reason string
	err    error
}

func (e *specError) Error() string { return e.err.Error() }
func (e *specError) Unwrap() error { return e.err }

func problem(reason, format string, args ...any) error {
	return &specError{reason: reason, err: fmt.Errorf(format, args...)}
}

// translation is a buffer as berth keeps it.
type translation struct {
	ref        *cbv1beta1.LocalObjectRef
	generation int64
	replicas   int32
	// cut says why berth keeps fewer chunks than the spec asks for (the
	// per-buffer maximum, the namespace's ResourceQuota); empty if not.
	cut string
	// quotaCut is the LimitedByQuotas condition; nil in a namespace
	// without ResourceQuotas.
	quotaCut *metav1.Condition
	// younger are the namespace's buffers that come after this one for
	// its quota (before).
	younger []string
}

// sameCut reports whether the buffer's status already says the count was
// cut to the same number, so that the event is recorded once per change.
func sameCut(cb *cbv1beta1.CapacityBuffer, tr translation) bool {
	c := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning)
	return c != nil && cb.Status.Replicas != nil && *cb.Status.Replicas == tr.replicas && strings.Contains(c.Message, tr.cut)
}

// translate resolves the buffer's pod template and chunk count. A problem
// with the buffer is a *specError.
func (r *Reconciler) translate(ctx context.Context, cb *cbv1beta1.CapacityBuffer) (translation, error) {
	sp := &cb.Spec
	var (
		template  corev1.PodTemplateSpec
		scalable  *int32
		pt        *corev1.PodTemplate
		fromOwner bool
	)
	switch {
	case sp.PodTemplateRef != nil:
		pt = &corev1.PodTemplate{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: sp.PodTemplateRef.Name}, pt)
		if apierrors.IsNotFound(err) {
			return translation{}, problem(ReasonTemplateNotFound, "PodTemplate %q not found", sp.PodTemplateRef.Name)
		} else if err != nil {
			return translation{}, err
		}
		template = pt.Template
	case sp.ScalableRef != nil:
		t, replicas, err := r.scalable(ctx, cb)
		if err != nil {
			return translation{}, err
		}
		template, scalable, fromOwner = t, &replicas, true
	default:
		return translation{}, problem(ReasonInvalid, "set spec.podTemplateRef or spec.scalableRef")
	}
	// Chunks are counted as the API server will admit their pods: a
	// container that only limits a resource requests it, one that sets
	// nothing gets the namespace's LimitRange defaults.
	lrs, err := clusterread.LimitRanges(ctx, r.Client, cb.Namespace)
	if err != nil {
		return translation{}, err
	}
	chunk := hr.ChunkSpec(&template, cb.Namespace, lrs)
	n, capped, err := hr.BufferReplicas(sp, scalable, chunk)
	if err != nil {
		return translation{}, &specError{reason: ReasonInvalid, err: err}
	}
	tr := translation{replicas: n}
	if capped {
		tr.cut = fmt.Sprintf("cut to berth's maximum of %d chunks per buffer", hr.MaxUnits)
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := r.Client.List(ctx, quotas, client.InNamespace(cb.Namespace)); err != nil {
		return translation{}, fmt.Errorf("listing resource quotas of %s: %w", cb.Namespace, err)
	}
	others, younger, err := r.otherChunks(ctx, cb, lrs)
	if err != nil {
		return translation{}, err
	}
	tr.younger = younger
	if len(quotas.Items) > 0 {
		tr.quotaCut = &metav1.Condition{Type: cbv1beta1.ConditionLimitedByQuotas, Status: metav1.ConditionFalse,
			Reason: cbv1beta1.ReasonResourceQuotasAllocated, Message: "the namespace's ResourceQuotas leave room for every chunk", ObservedGeneration: cb.Generation}
	}
	if allowed := hr.QuotaChunks(quotas.Items, chunk, others); float64(tr.replicas) > allowed {
		names := hr.QuotasBelow(quotas.Items, chunk, others, tr.replicas)
		tr.quotaCut.Status = metav1.ConditionTrue
		tr.quotaCut.Message = fmt.Sprintf("Buffer replicas limited from %d to %d due to quotas: %s", tr.replicas, int32(allowed), strings.Join(names, ", "))
		tr.replicas = int32(allowed)
		tr.cut = fmt.Sprintf("cut to %d chunks by the ResourceQuota of namespace %s (shared with its other buffers)", tr.replicas, cb.Namespace)
	}
	if fromOwner {
		if pt, err = r.ownTemplate(ctx, cb, template); err != nil {
			return translation{}, err
		}
	}
	tr.ref, tr.generation = &cbv1beta1.LocalObjectRef{Name: pt.Name}, pt.Generation
	return tr, nil
}

// ownTemplate keeps a PodTemplate owned by the buffer with the scalable
// object's pod template, so that status.podTemplateRef names it. A
// PodTemplate of that name the buffer does not control is someone else's:
// berth neither changes it nor takes it over (its garbage collection
// would delete it with the buffer), and says so in the buffer's status.
func (r *Reconciler) ownTemplate(ctx context.Context, cb *cbv1beta1.CapacityBuffer, template corev1.PodTemplateSpec) (*corev1.PodTemplate, error) {
	name := templateName(cb)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, problem(ReasonInvalid, "the buffer's pod template would be named %q: %s; use a shorter buffer name", name, strings.Join(errs, "; "))
	}
	pt := &corev1.PodTemplate{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: name}, pt)
	switch {
	case apierrors.IsNotFound(err):
		pt = &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cb.Namespace}, Template: template}
		if err := controllerutil.SetControllerReference(cb, pt, r.Client.Scheme()); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, pt); err != nil {
			return nil, fmt.Errorf("creating the pod template of buffer %s: %w", cb.Name, err)
		}
		return pt, nil
	case err != nil:
		return nil, fmt.Errorf("reading the pod template of buffer %s: %w", cb.Name, err)
	case !metav1.IsControlledBy(pt, cb):
		return nil, problem(ReasonInvalid, "PodTemplate %s/%s exists and is not this buffer's: berth keeps the pod template of a scalableRef buffer under that name; rename or delete that PodTemplate", cb.Namespace, name)
	case equality.Semantic.DeepEqual(pt.Template, template):
		return pt, nil
	}
	pt.Template = template
	if err := r.Client.Update(ctx, pt); err != nil {
		return nil, fmt.Errorf("updating the pod template of buffer %s: %w", cb.Name, err)
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

// before reports whether buffer a comes before b in the order a
// namespace's quota is handed out: by creation, then by name.
func before(a, b *cbv1beta1.CapacityBuffer) bool {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name)) < 0
}

// otherChunks are the chunks the namespace's buffers created before this
// one keep (their status), which its quota pays for first: a namespace's
// buffers share its quota in the order they were created (then by name),
// as Cluster Autoscaler hands it out, so that a younger buffer gives way
// when an older one grows.
func (r *Reconciler) otherChunks(ctx context.Context, cb *cbv1beta1.CapacityBuffer, lrs []*corev1.LimitRange) (out []hr.Chunks, younger []string, err error) {
	list := &cbv1beta1.CapacityBufferList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cb.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing the buffers of %s: %w", cb.Namespace, err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name != cb.Name && !before(o, cb) {
			younger = append(younger, o.Name)
		}
		if !before(o, cb) || o.Status.Replicas == nil || *o.Status.Replicas <= 0 || o.Status.PodTemplateRef == nil {
			continue
		}
		pt := &corev1.PodTemplate{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Status.PodTemplateRef.Name}, pt); apierrors.IsNotFound(err) {
			continue // its chunks are not kept without a template
		} else if err != nil {
			return nil, nil, fmt.Errorf("reading the pod template of buffer %s: %w", o.Name, err)
		}
		spec := hr.ChunkSpec(&pt.Template, o.Namespace, lrs) // counted as this buffer's chunk is
		out = append(out, hr.Chunks{Spec: spec, Count: min(*o.Status.Replicas, hr.MaxUnits)})
	}
	return out, younger, nil
}
