package headroom

import (
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
)

// BufferReplicas is the number of chunks of a CapacityBuffer: the larger of
// replicas and percentage of the scalable object's replicas (rounded up, at
// least 1), capped by limits; with neither, as many chunks as fit the
// limits. scalableReplicas is nil for a podTemplateRef buffer.
func BufferReplicas(spec *cbv1beta1.CapacityBufferSpec, scalableReplicas *int32, chunk corev1.PodSpec) (int32, error) {
	if spec.Percentage != nil && scalableReplicas == nil {
		return 0, errors.New("spec.percentage needs spec.scalableRef")
	}
	var n int32
	set := false
	if spec.Replicas != nil {
		n, set = *spec.Replicas, true
	}
	if spec.Percentage != nil {
		pct := int32(math.Ceil(float64(*scalableReplicas) * float64(*spec.Percentage) / 100))
		if *spec.Percentage > 0 {
			pct = max(pct, 1)
		}
		n, set = max(n, pct), true
	}
	if spec.Limits == nil {
		if !set {
			return 0, errors.New("set spec.replicas, spec.percentage or spec.limits")
		}
		return n, nil
	}
	fit, err := chunksWithin(*spec.Limits, chunk)
	if err != nil {
		return 0, err
	}
	if !set {
		return fit, nil
	}
	return min(n, fit), nil
}

// chunksWithin is how many chunks fit the limits.
func chunksWithin(limits cbv1beta1.ResourceList, chunk corev1.PodSpec) (int32, error) {
	req := resource.PodRequests(&corev1.Pod{Spec: chunk}, resource.PodResourcesOptions{})
	n := math.Inf(1)
	for name, limit := range limits {
		per := req[corev1.ResourceName(name)]
		if per.IsZero() {
			continue
		}
		n = min(n, math.Floor(limit.AsApproximateFloat64()/per.AsApproximateFloat64()))
	}
	if math.IsInf(n, 1) {
		return 0, errors.New("spec.limits: the chunk requests none of the limited resources")
	}
	return int32(n), nil
}

// BufferPods returns a buffer's chunks as pods that exist only in berth's
// plans: the template's spec at the lowest priority, in the buffer's
// namespace.
func BufferPods(cb *cbv1beta1.CapacityBuffer, template *corev1.PodTemplateSpec, replicas int32) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, replicas)
	prio := v1alpha1.PriorityHeadroom
	for i := range replicas {
		name := fmt.Sprintf("buffer-%s-%d", cb.Name, i)
		spec := template.Spec.DeepCopy()
		spec.Priority = &prio
		spec.NodeName = ""
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: cb.Namespace, UID: types.UID("virtual-" + cb.Namespace + "-" + name),
				Labels:      map[string]string{v1alpha1.LabelCapacityBuffer: cb.Namespace + "." + cb.Name},
				Annotations: map[string]string{v1alpha1.AnnotationVirtual: "true"},
			},
			Spec:   *spec,
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		for k, v := range template.Labels {
			p.Labels[k] = v
		}
		out = append(out, p)
	}
	return out
}
