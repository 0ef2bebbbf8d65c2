package drain

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonLocalStorage is the reason of a pod whose data would be lost.
const ReasonLocalStorage Reason = "LocalStorage"

// LocalStorage blocks: a pod with an emptyDir on the node's disk or a
// hostPath volume loses that data when evicted, so it keeps its node,
// unless every such volume is named in its annotation
// cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes (volume
// names separated by commas, exactly as Cluster Autoscaler reads them).
// In-memory emptyDirs do not count.
type LocalStorage struct{}

// Name returns the rule's reason.
func (LocalStorage) Name() Reason { return ReasonLocalStorage }

// Check implements Rule.
func (LocalStorage) Check(p *corev1.Pod, _ *Context) Outcome {
	allowed := map[string]bool{}
	if v := p.Annotations[annotationSafeToEvictLocalVolumes]; v != "" {
		for _, name := range strings.Split(v, ",") {
			allowed[name] = true
		}
	}
	for _, v := range p.Spec.Volumes {
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory)
		if local && !allowed[v.Name] {
			return Outcome{Verdict: Blocks, Reason: ReasonLocalStorage,
				Message: "pod " + podName(p) + " has local storage (volume " + v.Name + "; list it in " + annotationSafeToEvictLocalVolumes + " to allow losing it)"}
		}
	}
	return Outcome{}
}
