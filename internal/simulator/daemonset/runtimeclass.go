package daemonset

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
)

// withRuntimeClass gives spec what the RuntimeClass admission plugin
// gives a pod of the RuntimeClass it names among rcs: the class's pod
// overhead, its scheduling node selector and tolerations. It reports
// whether it changed anything. A pod the plugin would refuse (no such
// class, an overhead or node selector of its own that differs) is left
// as it is: the DaemonSet controller makes no pod of it, and berth keeps
// reading its template.
func withRuntimeClass(spec *corev1.PodSpec, rcs []*nodev1.RuntimeClass) bool {
	if spec.RuntimeClassName == nil {
		return false
	}
	i := slices.IndexFunc(rcs, func(rc *nodev1.RuntimeClass) bool { return rc.Name == *spec.RuntimeClassName })
	if i < 0 {
		return false
	}
	rc := rcs[i]
	var overhead corev1.ResourceList
	if rc.Overhead != nil && len(rc.Overhead.PodFixed) > 0 {
		overhead = rc.Overhead.PodFixed
		if len(spec.Overhead) > 0 && !sameList(spec.Overhead, overhead) {
			return false
		}
	}
	var selector map[string]string
	var tolerations []corev1.Toleration
	if rc.Scheduling != nil {
		selector, tolerations = rc.Scheduling.NodeSelector, rc.Scheduling.Tolerations
		for k, v := range selector {
			if have, ok := spec.NodeSelector[k]; ok && have != v {
				return false
			}
		}
	}
	changed := false
	if overhead != nil && len(spec.Overhead) == 0 {
		spec.Overhead, changed = overhead.DeepCopy(), true
	}
	for k, v := range selector {
		if _, ok := spec.NodeSelector[k]; !ok {
			if spec.NodeSelector == nil {
				spec.NodeSelector = map[string]string{}
			}
			spec.NodeSelector[k], changed = v, true
		}
	}
	for _, t := range tolerations {
		if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			spec.Tolerations, changed = append(spec.Tolerations, t), true
		}
	}
	return changed
}

// sameList reports whether two resource lists hold the same quantities.
func sameList(a, b corev1.ResourceList) bool {
	return maps.EqualFunc(a, b, func(x, y apiresource.Quantity) bool { return x.Cmp(y) == 0 })
}
