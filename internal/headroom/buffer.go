package headroom

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// BufferReplicas is the number of chunks of a CapacityBuffer: the larger of
// replicas and percentage of the scalable object's replicas (rounded up:
// of zero replicas, zero, as Cluster Autoscaler counts), capped by limits; with neither, as many chunks as fit the
// limits. scalableReplicas is nil for a podTemplateRef buffer. The result is
// bounded by MaxUnits whatever the spec says (the upstream API has no
// maxima); capped reports that the spec asked for more.
func BufferReplicas(spec *cbv1beta1.CapacityBufferSpec, scalableReplicas *int32, chunk corev1.PodSpec) (n int32, capped bool, err error) {
	if spec.Percentage != nil && scalableReplicas == nil && spec.Replicas == nil && spec.Limits == nil {
		return 0, false, errors.New("spec.percentage needs spec.scalableRef")
	}
	if spec.Replicas != nil && *spec.Replicas < 0 {
		return 0, false, fmt.Errorf("spec.replicas must not be negative, not %d", *spec.Replicas)
	}
	if spec.Percentage != nil && *spec.Percentage < 0 {
		return 0, false, fmt.Errorf("spec.percentage must not be negative, not %d", *spec.Percentage)
	}
	// Counts are computed in floating point: replicas times a percentage
	// overflows int32 long before it is absurd.
	want, set := 0.0, false
	if spec.Replicas != nil {
		want, set = float64(*spec.Replicas), true
	}
	if spec.Percentage != nil && scalableReplicas != nil { // of nothing without a scalable object, as Cluster Autoscaler reads it
		pct := math.Ceil(float64(max(*scalableReplicas, 0)) * float64(*spec.Percentage) / 100)
		want, set = max(want, pct), true
	}
	if spec.Limits != nil {
		fit, err := chunksWithin(*spec.Limits, chunk)
		if err != nil {
			return 0, false, err
		}
		if set {
			want = min(want, fit)
		} else {
			want, set = fit, true
		}
	}
	if !set {
		return 0, false, errors.New("set spec.replicas, spec.percentage or spec.limits")
	}
	n, capped = clampUnits(want)
	return n, capped, nil
}

// chunksWithin is how many chunks fit the limits.
func chunksWithin(limits cbv1beta1.ResourceList, chunk corev1.PodSpec) (float64, error) {
	req := resource.PodRequests(&corev1.Pod{Spec: chunk}, resource.PodResourcesOptions{})
	n, limited := math.Inf(1), false
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		limit := limits[name]
		if limit.Sign() < 0 {
			return 0, fmt.Errorf("spec.limits.%s must not be negative, not %s", name, limit.String())
		}
		per := req[corev1.ResourceName(name)]
		if per.Sign() <= 0 {
			continue
		}
		limited = true
		n = min(n, wholeChunks(limit.AsDec(), per.AsDec())) // exact: 600m / 200m is three chunks; +Inf past a float64
	}
	if !limited {
		return 0, errors.New("spec.limits: the chunk requests none of the limited resources")
	}
	return n, nil
}

// ChunkSpec is the spec of a buffer's chunk as the API server would admit
// its pods in namespace ns (podutil.Admit): a container that only limits
// a resource requests it, and one that sets nothing gets the defaults of
// the namespace's LimitRanges, as the pods the buffer keeps room for will.
// Chunks are counted, fitted to quotas and planned with it. template is
// not changed.
func ChunkSpec(template *corev1.PodTemplateSpec, ns string, lrs []*corev1.LimitRange) corev1.PodSpec {
	spec := template.Spec.DeepCopy()
	podutil.Admit(spec, ns, lrs)
	return *spec
}

// BufferPods returns a buffer's chunks as pods that exist only in berth's
// plans: the template's spec as admitted in the buffer's namespace
// (ChunkSpec, with its LimitRanges lrs) at the lowest priority.
func BufferPods(cb *cbv1beta1.CapacityBuffer, template *corev1.PodTemplateSpec, lrs []*corev1.LimitRange, replicas int32) []*corev1.Pod {
	// The count comes from status, which other autoscalers serving the same
	// API may write too: bound it again.
	replicas, _ = clampUnits(float64(replicas))
	out := make([]*corev1.Pod, 0, replicas)
	prio := v1alpha1.PriorityHeadroom
	chunk := ChunkSpec(template, cb.Namespace, lrs)
	for i := range replicas {
		name := fmt.Sprintf("buffer-%s-%d", cb.Name, i)
		spec := *chunk.DeepCopy()
		spec.Priority = &prio
		spec.NodeName = ""
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: cb.Namespace, UID: types.UID("virtual-" + cb.Namespace + "-" + name),
				Labels:      map[string]string{v1alpha1.LabelCapacityBuffer: cb.Namespace + "." + cb.Name},
				Annotations: map[string]string{v1alpha1.AnnotationVirtual: "true"},
			},
			Spec:   spec,
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		for k, v := range template.Labels {
			p.Labels[k] = v
		}
		out = append(out, p)
	}
	return out
}
