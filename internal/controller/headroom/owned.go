package headroom

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
)

func placeholderName(h *v1alpha1.Headroom) string { return "headroom-" + h.Name }

// annotationSpecHash records the hash of what berth last wrote into a
// Deployment or DaemonSet it owns.
const annotationSpecHash = "berth.dev/spec-hash"

// specHash hashes a replica count and pod template as berth builds them.
func specHash(replicas int32, t corev1.PodTemplateSpec) string {
	data, _ := json.Marshal(struct {
		R int32
		T corev1.PodTemplateSpec
	}{replicas, t})
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}

// placeholders keeps a Deployment of placeholder pods, one per unit, while
// spec.placeholders is set, and removes it otherwise. Its ReplicaSet
// recreates a preempted placeholder, which goes pending and makes the
// provisioner restore the headroom.
func (r *Reconciler) placeholders(ctx context.Context, h *v1alpha1.Headroom, res hr.Resolved) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: placeholderName(h), Namespace: v1alpha1.SystemNamespace}}
	if !h.Spec.Placeholders || len(res.Shape.Resources) == 0 {
		return client.IgnoreNotFound(r.Client.Delete(ctx, d))
	}
	labels := hr.PlaceholderLabels(h)
	replicas := res.Count
	template := hr.PlaceholderTemplate(h, res)
	hr.WithPauseImage(&template.Spec, r.PauseImage)
	hash := specHash(replicas, template)
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, d, func() error {
		// Only write what berth wants when it changed, or when someone
		// changed what berth set (scaled the Deployment by hand, edited
		// its pods' priority): the API server defaults the template, so
		// writing it back every time would roll the placeholders on every
		// reconcile.
		if d.Annotations[annotationSpecHash] != hash || d.Spec.Replicas == nil || *d.Spec.Replicas != replicas ||
			!equality.Semantic.DeepDerivative(template, d.Spec.Template) {
			d.Labels = labels
			d.Annotations = map[string]string{annotationSpecHash: hash}
			d.Spec.Replicas = &replicas
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
			d.Spec.Template = template
		}
		return controllerutil.SetControllerReference(h, d, r.Client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("placeholders of headroom %s: %w", h.Name, err)
	}
	if op != controllerutil.OperationResultNone {
		log.FromContext(ctx).Info("placeholders", "headroom", h.Name, "replicas", res.Count, "operation", op)
	}
	return nil
}

// nodeReserve keeps the per-node reserve DaemonSet while spec.perNode is
// set and returns how many nodes hold the reserve.
func (r *Reconciler) nodeReserve(ctx context.Context, h *v1alpha1.Headroom) (int32, error) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: hr.NodeReserveName(h), Namespace: v1alpha1.SystemNamespace}}
	if h.Spec.PerNode == nil {
		return 0, client.IgnoreNotFound(r.Client.Delete(ctx, ds))
	}
	want := hr.NodeReserveDaemonSet(h)
	hr.WithPauseImage(&want.Spec.Template.Spec, r.PauseImage)
	hash := specHash(0, want.Spec.Template)
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, ds, func() error {
		// As for placeholders: rewriting the defaulted template would
		// restart the reserve pods, and a restarted reserve pod does not
		// preempt: it may not get its slice back.
		if ds.Annotations[annotationSpecHash] != hash || !equality.Semantic.DeepDerivative(want.Spec.Template, ds.Spec.Template) {
			ds.Labels = want.Labels
			ds.Annotations = map[string]string{annotationSpecHash: hash}
			if ds.Spec.Selector == nil {
				ds.Spec.Selector = want.Spec.Selector // immutable once set
			}
			ds.Spec.Template = want.Spec.Template
			ds.Spec.UpdateStrategy = want.Spec.UpdateStrategy // with the change it rolls out
		}
		return controllerutil.SetControllerReference(h, ds, r.Client.Scheme())
	})
	if err != nil {
		return 0, fmt.Errorf("node reserve of headroom %s: %w", h.Name, err)
	}
	return ds.Status.NumberReady, nil
}

// priorityClasses checks, when the manager starts, that berth's
// PriorityClasses are installed (config/system/priorityclasses.yaml):
// berth does not create cluster-wide priority classes itself, so that it
// needs no right to create them. A missing class is logged as an error
// that says what to apply; placeholders and reserve pods cannot start
// without it.
//
// It reads through the API reader, not the cache: a cached Get would start
// an informer (list and watch rights berth does not have) and wait for it.
type priorityClasses struct{ client client.Reader }

// Start checks the classes once.
func (p *priorityClasses) Start(ctx context.Context) error {
	for _, name := range []string{v1alpha1.PriorityClassHeadroom, v1alpha1.PriorityClassNodeReserve, v1alpha1.PriorityClassBurstCritical} {
		err := p.client.Get(ctx, client.ObjectKey{Name: name}, &schedulingv1.PriorityClass{})
		switch {
		case apierrors.IsNotFound(err):
			log.FromContext(ctx).Error(err, "berth's PriorityClass is missing: placeholders and per-node reserve pods cannot start; apply config/system/priorityclasses.yaml", "priorityClass", name)
		case err != nil:
			log.FromContext(ctx).Error(err, "could not check berth's PriorityClass", "priorityClass", name)
		}
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection returns false: every replica checks.
func (p *priorityClasses) NeedLeaderElection() bool { return false }

// placeholdersRefused says why the placeholder Deployment's pods cannot be
// created ("" when they can, or there are none): its ReplicaFailure
// condition, which the Deployment controller copies from its ReplicaSet's
// FailedCreate (a PriorityClass missing, a ResourceQuota or LimitRange of
// berth-system refusing the pods).
func (r *Reconciler) placeholdersRefused(ctx context.Context, h *v1alpha1.Headroom) string {
	if !h.Spec.Placeholders {
		return ""
	}
	d := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: placeholderName(h)}, d); err != nil {
		return ""
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}
