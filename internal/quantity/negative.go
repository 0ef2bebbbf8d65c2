package quantity

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// NegativeRequests refuses a pod spec that asks for a negative quantity,
// as the API server does: such a pod would make room on its node out of
// nothing. Files berth reads (berth plan, traces) are checked with it.
func NegativeRequests(spec *corev1.PodSpec) error {
	var errs []error
	for _, cs := range []struct {
		field string
		list  []corev1.Container
	}{{"spec.initContainers", spec.InitContainers}, {"spec.containers", spec.Containers}} {
		for _, c := range cs.list {
			errs = append(errs, Negative(cs.field+"["+c.Name+"].resources.requests", c.Resources.Requests),
				Negative(cs.field+"["+c.Name+"].resources.limits", c.Resources.Limits))
		}
	}
	errs = append(errs, Negative("spec.overhead", spec.Overhead))
	if spec.Resources != nil {
		errs = append(errs, Negative("spec.resources.requests", spec.Resources.Requests), Negative("spec.resources.limits", spec.Resources.Limits))
	}
	return errors.Join(errs...)
}

// Negative reports the first negative quantity of a list, naming field.
func Negative(field string, rl corev1.ResourceList) error {
	for _, name := range slices.Sorted(maps.Keys(rl)) {
		if q := rl[name]; q.Sign() < 0 {
			return fmt.Errorf("%s.%s is %s: quantities must not be negative", field, name, q.String())
		}
	}
	return nil
}
