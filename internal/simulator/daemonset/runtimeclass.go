package daemonset

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
)

// withRuntimeClass gives spec what the RuntimeClass admission plugin
// gives a pod of the RuntimeClass it names among rcs and that decides
// where the DaemonSet's pod holds room: the class's pod overhead and its
// scheduling node selector (a pod admitted on a node the selector does
// not match stays pending there, holding nothing). The class's
// tolerations are left out: the DaemonSet controller chooses the nodes
// it makes pods for by the template's tolerations and its own, before
// admission adds any. It reports whether it changed anything. A pod the
// plugin would refuse (no such class, an overhead or node selector of its
// own that differs) is never made, and is left as it is.
func withRuntimeClass(spec *corev1.PodSpec, rcs []*nodev1.RuntimeClass) bool {
	if spec.RuntimeClassName == nil {
		return false
	}
	i := slices.IndexFunc(rcs, func(rc *nodev1.RuntimeClass) bool { return rc.Name == *spec.RuntimeClassName })
	if i < 0 {
		return false
	}
	rc := rcs[i]
	if rc.Overhead != nil && len(spec.Overhead) > 0 && !sameList(spec.Overhead, rc.Overhead.PodFixed) {
		return false
	}
	var selector map[string]string
	if rc.Scheduling != nil {
		selector = rc.Scheduling.NodeSelector
	}
	for k, v := range selector {
		if have, ok := spec.NodeSelector[k]; ok && have != v {
			return false
		}
	}
	changed := false
	if rc.Overhead != nil && len(rc.Overhead.PodFixed) > 0 && len(spec.Overhead) == 0 {
		spec.Overhead, changed = rc.Overhead.PodFixed.DeepCopy(), true
	}
	for k, v := range selector {
		if _, ok := spec.NodeSelector[k]; !ok {
			if spec.NodeSelector == nil {
				spec.NodeSelector = map[string]string{}
			}
			spec.NodeSelector[k], changed = v, true
		}
	}
	return changed
}

// sameList reports whether two resource lists hold the same quantities.
func sameList(a, b corev1.ResourceList) bool {
	return maps.EqualFunc(a, b, func(x, y apiresource.Quantity) bool { return x.Cmp(y) == 0 })
}
