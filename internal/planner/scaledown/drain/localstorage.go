package drain

import corev1 "k8s.io/api/core/v1"

// ReasonLocalStorage is the reason of a pod whose data would be lost.
const ReasonLocalStorage Reason = "LocalStorage"

// LocalStorage blocks: a pod with an emptyDir on the node's disk or a hostPath
// volume loses that data when evicted, so it keeps its node unless the
// context allows local storage. In-memory emptyDirs do not count.
type LocalStorage struct{}

// Name returns the rule's reason.
func (LocalStorage) Name() Reason { return ReasonLocalStorage }

// Check implements Rule.
func (LocalStorage) Check(p *corev1.Pod, c *Context) Outcome {
	if c.AllowLocalStorage {
		return Outcome{}
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory) {
			return Outcome{Verdict: Blocks, Reason: ReasonLocalStorage,
				Message: "pod " + podName(p) + " has local storage (volume " + v.Name + ")"}
		}
	}
	return Outcome{}
}
