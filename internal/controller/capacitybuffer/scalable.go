package capacitybuffer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
)

// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments/scale;statefulsets/scale;replicasets/scale,verbs=get
// +kubebuilder:rbac:groups="",resources=replicationcontrollers/scale,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// scalable reads the pod template and the replicas of a buffer's
// scalableRef. Deployments, StatefulSets and ReplicaSets give their pod
// template and desired replicas; a Job its template and parallelism (how
// many pods run at once; a Job has no scale subresource). Any other kind
// with a scale subresource (ReplicationController, custom resources such as
// rollouts) gives its desired replicas, and the newest of its pods (found by
// the scale's selector) gives the shape, as Cluster Autoscaler does; until
// a pod exists, the template berth copied before is kept. A problem with
// the buffer is a *specError.
func (r *Reconciler) scalable(ctx context.Context, cb *cbv1beta1.CapacityBuffer) (corev1.PodTemplateSpec, int32, error) {
	ref := cb.Spec.ScalableRef
	var obj client.Object
	var read func() (corev1.PodTemplateSpec, *int32)
	switch {
	case ref.APIGroup == "apps" && ref.Kind == "Deployment":
		d := &appsv1.Deployment{}
		obj, read = d, func() (corev1.PodTemplateSpec, *int32) { return d.Spec.Template, d.Spec.Replicas }
	case ref.APIGroup == "apps" && ref.Kind == "StatefulSet":
		s := &appsv1.StatefulSet{}
		obj, read = s, func() (corev1.PodTemplateSpec, *int32) { return s.Spec.Template, s.Spec.Replicas }
	case ref.APIGroup == "apps" && ref.Kind == "ReplicaSet":
		s := &appsv1.ReplicaSet{}
		obj, read = s, func() (corev1.PodTemplateSpec, *int32) { return s.Spec.Template, s.Spec.Replicas }
	case ref.APIGroup == "batch" && ref.Kind == "Job":
		j := &batchv1.Job{}
		obj, read = j, func() (corev1.PodTemplateSpec, *int32) { return j.Spec.Template, j.Spec.Parallelism }
	default:
		return r.fromScale(ctx, cb)
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: ref.Name}, obj); apierrors.IsNotFound(err) {
		return corev1.PodTemplateSpec{}, 0, problem(ReasonScalableNotFound, "%s %q not found", ref.Kind, ref.Name)
	} else if err != nil {
		return corev1.PodTemplateSpec{}, 0, err
	}
	template, replicas := read()
	return template, ptr.Deref(replicas, 1), nil // 1 is the API's default for all four
}

// fromScale reads any kind through its scale subresource.
func (r *Reconciler) fromScale(ctx context.Context, cb *cbv1beta1.CapacityBuffer) (corev1.PodTemplateSpec, int32, error) {
	ref := cb.Spec.ScalableRef
	group := ref.APIGroup
	if group == "core" {
		group = "" // Cluster Autoscaler's spelling of the core group
	}
	mapping, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: ref.Kind})
	if meta.IsNoMatchError(err) {
		return corev1.PodTemplateSpec{}, 0, problem(ReasonUnsupportedScalable, "no API serves kind %s in group %q", ref.Kind, ref.APIGroup)
	} else if err != nil {
		return corev1.PodTemplateSpec{}, 0, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	obj.SetNamespace(cb.Namespace)
	obj.SetName(ref.Name)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	if err := r.Client.SubResource("scale").Get(ctx, obj, u); err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) && apierrors.IsNotFound(err) {
			// The API server names the object when it is missing; a kind
			// without the subresource has no such route at all.
			if d := status.Status().Details; d != nil && d.Name == ref.Name {
				return corev1.PodTemplateSpec{}, 0, problem(ReasonScalableNotFound, "%s %q not found", ref.Kind, ref.Name)
			}
			return corev1.PodTemplateSpec{}, 0, problem(ReasonUnsupportedScalable, "kind %s has no scale subresource", mapping.GroupVersionKind.GroupKind())
		}
		return corev1.PodTemplateSpec{}, 0, fmt.Errorf("reading the scale of %s %s: %w", ref.Kind, ref.Name, err)
	}
	scale := &autoscalingv1.Scale{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, scale); err != nil {
		return corev1.PodTemplateSpec{}, 0, fmt.Errorf("reading the scale of %s %s: %w", ref.Kind, ref.Name, err)
	}
	template, err := r.newestPod(ctx, cb, scale.Status.Selector)
	return template, scale.Spec.Replicas, err
}

// newestPod returns the shape of the newest pod the selector matches, or
// the template copied before when no pod exists now.
func (r *Reconciler) newestPod(ctx context.Context, cb *cbv1beta1.CapacityBuffer, selector string) (corev1.PodTemplateSpec, error) {
	ref := cb.Spec.ScalableRef
	sel, err := labels.Parse(selector)
	if err != nil || sel.Empty() {
		return corev1.PodTemplateSpec{}, problem(ReasonUnsupportedScalable, "the scale of %s %s reports no usable pod selector (%q)", ref.Kind, ref.Name, selector)
	}
	pods := &corev1.PodList{}
	if err := r.PodReader.List(ctx, pods, client.InNamespace(cb.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("listing the pods of %s %s: %w", ref.Kind, ref.Name, err)
	}
	live := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(live) == 0 {
		pt := &corev1.PodTemplate{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: templateName(cb)}, pt)
		if err == nil && metav1.IsControlledBy(pt, cb) {
			return pt.Template, nil
		}
		return corev1.PodTemplateSpec{}, problem(ReasonNoPodToCopy, "%s %s has no pod yet to take the chunk's shape from (selector %s)", ref.Kind, ref.Name, selector)
	}
	newest := slices.MaxFunc(live, func(a, b corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	spec := *newest.Spec.DeepCopy()
	spec.NodeName = "" // a chunk may go to any node
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: newest.Labels, Annotations: newest.Annotations}, Spec: spec}, nil
}
