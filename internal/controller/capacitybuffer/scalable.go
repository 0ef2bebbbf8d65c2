package capacitybuffer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
)

// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments/scale;statefulsets/scale;replicasets/scale,verbs=get
// +kubebuilder:rbac:groups="",resources=replicationcontrollers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=replicationcontrollers/scale,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// scalable reads the pod shape and the replicas of a buffer's
// scalableRef. Deployments, StatefulSets, ReplicaSets and
// ReplicationControllers give their desired replicas, a Job its
// parallelism (how many pods run at once; a Job has no scale
// subresource); the shape is that of the newest of the pods they control
// (a Deployment: its current ReplicaSet), which the API server's
// admission has completed (a LimitRange's default requests, injected
// sidecars), without a StatefulSet pod's own claims and identity, or
// their pod template while they have none, as Cluster Autoscaler does. Any other
// kind with a scale subresource (custom resources such as rollouts)
// gives its desired replicas, and the newest of its pods (found by the
// scale's selector) the shape; until a pod exists, the template berth
// copied before is kept. A problem with the buffer is a *specError.
func (r *Reconciler) scalable(ctx context.Context, cb *cbv1beta1.CapacityBuffer) (corev1.PodTemplateSpec, int32, error) {
	ref := cb.Spec.ScalableRef
	var obj client.Object
	var read func() (corev1.PodTemplateSpec, *int32, labels.Selector, error)
	fromLabelSelector := func(template corev1.PodTemplateSpec, replicas *int32, ls *metav1.LabelSelector) (corev1.PodTemplateSpec, *int32, labels.Selector, error) {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		return template, replicas, sel, err
	}
	switch {
	case ref.APIGroup == "apps" && ref.Kind == "Deployment":
		d := &appsv1.Deployment{}
		obj, read = d, func() (corev1.PodTemplateSpec, *int32, labels.Selector, error) {
			return fromLabelSelector(d.Spec.Template, d.Spec.Replicas, d.Spec.Selector)
		}
	case ref.APIGroup == "apps" && ref.Kind == "StatefulSet":
		s := &appsv1.StatefulSet{}
		obj, read = s, func() (corev1.PodTemplateSpec, *int32, labels.Selector, error) {
			return fromLabelSelector(s.Spec.Template, s.Spec.Replicas, s.Spec.Selector)
		}
	case ref.APIGroup == "apps" && ref.Kind == "ReplicaSet":
		s := &appsv1.ReplicaSet{}
		obj, read = s, func() (corev1.PodTemplateSpec, *int32, labels.Selector, error) {
			return fromLabelSelector(s.Spec.Template, s.Spec.Replicas, s.Spec.Selector)
		}
	case ref.APIGroup == "batch" && ref.Kind == "Job":
		j := &batchv1.Job{}
		obj, read = j, func() (corev1.PodTemplateSpec, *int32, labels.Selector, error) {
			return fromLabelSelector(j.Spec.Template, jobPods(j), j.Spec.Selector)
		}
	case (ref.APIGroup == "" || ref.APIGroup == "core") && ref.Kind == "ReplicationController": // "core": Cluster Autoscaler's spelling
		rc := &corev1.ReplicationController{}
		obj, read = rc, func() (corev1.PodTemplateSpec, *int32, labels.Selector, error) {
			var template corev1.PodTemplateSpec
			if rc.Spec.Template != nil {
				template = *rc.Spec.Template
			}
			return template, rc.Spec.Replicas, labels.SelectorFromSet(rc.Spec.Selector), nil
		}
	default:
		return r.fromScale(ctx, cb)
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: ref.Name}, obj); apierrors.IsNotFound(err) {
		return corev1.PodTemplateSpec{}, 0, problem(ReasonScalableNotFound, "%s %q not found", ref.Kind, ref.Name)
	} else if err != nil {
		return corev1.PodTemplateSpec{}, 0, err
	}
	template, replicas, sel, err := read()
	if err != nil {
		return corev1.PodTemplateSpec{}, 0, problem(ReasonUnsupportedScalable, "the selector of %s %s: %v", ref.Kind, ref.Name, err)
	}
	owner := obj.GetUID()
	if d, ok := obj.(*appsv1.Deployment); ok {
		// Its pods are its current ReplicaSet's: an older revision's pods
		// (a rollout) have the former shape.
		if owner, err = r.currentReplicaSet(ctx, d, sel); err != nil {
			return corev1.PodTemplateSpec{}, 0, err
		}
	}
	if !sel.Empty() && owner != "" {
		pod, err := r.newestPod(ctx, cb, sel, owner)
		if err != nil {
			return corev1.PodTemplateSpec{}, 0, err
		}
		if pod != nil {
			template = shapeOf(pod)
		}
		if s, ok := obj.(*appsv1.StatefulSet); ok {
			name := ""
			if pod != nil {
				name = pod.Name
			}
			withoutIdentity(&template, s, name)
		}
	}
	return template, ptr.Deref(replicas, 1), nil // 1 is the API's default for all five
}

// currentReplicaSet is the UID of the Deployment's ReplicaSet of its
// highest revision (the one its template makes now), "" when it has none.
func (r *Reconciler) currentReplicaSet(ctx context.Context, d *appsv1.Deployment, sel labels.Selector) (types.UID, error) {
	// Their metadata only, from the cache (the drain rules keep it).
	rss := &metav1.PartialObjectMetadataList{}
	rss.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSetList"))
	if err := r.Client.List(ctx, rss, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return "", fmt.Errorf("listing the ReplicaSets of Deployment %s: %w", d.Name, err)
	}
	var uid types.UID
	best := int64(-1)
	for i := range rss.Items {
		rs := &rss.Items[i]
		if c := metav1.GetControllerOf(rs); c == nil || c.UID != d.UID || rs.DeletionTimestamp != nil {
			continue
		}
		rev, err := strconv.ParseInt(rs.Annotations["deployment.kubernetes.io/revision"], 10, 64)
		if err == nil && rev > best {
			best, uid = rev, rs.UID
		}
	}
	return uid, nil
}

// withoutIdentity takes out of a StatefulSet's shape (of its pod named
// pod, or of its template: pod "") what is a pod's own: the volumes of its
// volumeClaimTemplates become empty dirs (a chunk naming the pod's claim
// would need that one volume, in its zone; the template mounts volumes
// it does not have, which a PodTemplate may not), its hostname and
// subdomain, and its pod-name and pod-index labels.
func withoutIdentity(t *corev1.PodTemplateSpec, s *appsv1.StatefulSet, pod string) {
	t.Spec.Volumes = slices.Clone(t.Spec.Volumes)
	for _, c := range s.Spec.VolumeClaimTemplates {
		i := slices.IndexFunc(t.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.Name })
		switch {
		case i < 0:
			t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		case t.Spec.Volumes[i].PersistentVolumeClaim != nil && t.Spec.Volumes[i].PersistentVolumeClaim.ClaimName == c.Name+"-"+pod:
			t.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		}
	}
	t.Spec.Hostname, t.Spec.Subdomain = "", ""
	t.Labels = maps.Clone(t.Labels)
	delete(t.Labels, appsv1.StatefulSetPodNameLabel)
	delete(t.Labels, appsv1.PodIndexLabel)
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
	sel, err := labels.Parse(scale.Status.Selector)
	if err != nil || sel.Empty() {
		return corev1.PodTemplateSpec{}, 0, problem(ReasonUnsupportedScalable, "the scale of %s %s reports no usable pod selector (%q)", ref.Kind, ref.Name, scale.Status.Selector)
	}
	pod, err := r.newestPod(ctx, cb, sel, "")
	if err != nil {
		return corev1.PodTemplateSpec{}, 0, err
	}
	if pod != nil {
		return shapeOf(pod), scale.Spec.Replicas, nil
	}
	pt := &corev1.PodTemplate{} // the shape copied before, while no pod exists
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: templateName(cb)}, pt); err == nil && metav1.IsControlledBy(pt, cb) {
		return pt.Template, scale.Spec.Replicas, nil
	}
	return corev1.PodTemplateSpec{}, 0, problem(ReasonNoPodToCopy, "%s %s has no pod yet to take the chunk's shape from (selector %s)", ref.Kind, ref.Name, sel)
}

// newestPod is the newest pod, not being deleted, that the selector
// matches in the buffer's namespace and, when owner is set, that owner
// controls (a Job of a Helm hook may carry a Deployment's labels); nil
// when there is none.
func (r *Reconciler) newestPod(ctx context.Context, cb *cbv1beta1.CapacityBuffer, sel labels.Selector, owner types.UID) (*corev1.Pod, error) {
	ref := cb.Spec.ScalableRef
	pods := &corev1.PodList{}
	if err := r.PodReader.List(ctx, pods, client.InNamespace(cb.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the pods of %s %s: %w", ref.Kind, ref.Name, err)
	}
	live := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		c := metav1.GetControllerOf(&p)
		return p.DeletionTimestamp != nil || owner != "" && (c == nil || c.UID != owner)
	})
	if len(live) == 0 {
		return nil, nil
	}
	newest := slices.MaxFunc(live, func(a, b corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return &newest, nil
}

// shapeOf is a pod's shape as a chunk's template: its labels,
// annotations and spec, but the node it is bound to (a chunk may go to
// any node) and its ephemeral containers (debugging, added later, and
// refused in a template).
func shapeOf(p *corev1.Pod) corev1.PodTemplateSpec {
	spec := *p.Spec.DeepCopy()
	spec.NodeName, spec.EphemeralContainers = "", nil
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations}, Spec: spec}
}

// jobPods is how many pods a Job runs at once from now: none once it
// completed or failed (its parallelism stays set), and no more than the
// completions it still needs.
func jobPods(j *batchv1.Job) *int32 {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return new(int32)
		}
	}
	if j.Spec.Parallelism == nil || j.Spec.Completions == nil {
		return j.Spec.Parallelism
	}
	left := max(*j.Spec.Completions-j.Status.Succeeded, 0)
	n := min(*j.Spec.Parallelism, left)
	return &n
}
