package podutil

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/quantity"
)

// maxCPU and maxMemory bound a companion's requests read from the
// annotation, which anyone who can edit the pod can write.
var (
	maxCPU    = resource.NewMilliQuantity(1<<20, resource.DecimalSI) // about 1000 cores
	maxMemory = resource.NewQuantity(1<<50, resource.BinarySI)       // 1 PiB
)

// CompanionRequests reads the companion requests on a workload
// (AnnotationCompanionRequests, written by berth or by hand): its cpu and
// memory, nothing else (the placeholder holding the room asks for no
// more). found is false when the pod has no annotation. An annotation
// that cannot be read, holds a negative or out-of-bounds request or no
// cpu or memory at all gives an error: the workload has no companion
// berth can plan. The planner and the companion controller both read it
// here, so that they never disagree.
func CompanionRequests(pod *corev1.Pod) (req corev1.ResourceList, found bool, err error) {
	raw, found := pod.Annotations[v1alpha1.AnnotationCompanionRequests]
	if !found {
		return nil, false, nil
	}
	if h := quantity.HugeExponent([]byte(raw)); h != "" {
		// apimachinery does not return from parsing some of these.
		return nil, true, fmt.Errorf("annotation %s: %s has an exponent of more than %d digits", v1alpha1.AnnotationCompanionRequests, h, quantity.MaxExponentDigits)
	}
	var all corev1.ResourceList
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		return nil, true, fmt.Errorf("annotation %s is not a resource list: %w", v1alpha1.AnnotationCompanionRequests, err)
	}
	req = corev1.ResourceList{}
	for name, limit := range map[corev1.ResourceName]*resource.Quantity{corev1.ResourceCPU: maxCPU, corev1.ResourceMemory: maxMemory} {
		q, ok := all[name]
		switch {
		case !ok || q.IsZero():
			continue
		case q.Sign() < 0 || q.Cmp(*limit) > 0:
			return nil, true, fmt.Errorf("annotation %s: %s %s is not between 0 and %s", v1alpha1.AnnotationCompanionRequests, name, q.String(), limit.String())
		}
		req[name] = q
	}
	if len(req) == 0 {
		return nil, true, errors.New("annotation " + v1alpha1.AnnotationCompanionRequests + " names no cpu or memory")
	}
	return req, true, nil
}
