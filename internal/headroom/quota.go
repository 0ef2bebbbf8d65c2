package headroom

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"
)

// QuotaChunks is how many chunks of a buffer the ResourceQuotas of its
// namespace leave room for: for each quota without scopes and each resource
// it limits that a chunk uses (cpu and requests.cpu, memory and
// requests.memory, ephemeral-storage, extended resources as requests.<name>,
// limits.<name> against the chunk's limits, pods and count/pods one per
// chunk), what is left (hard - used) divided by what one chunk takes,
// rounded down. It is +Inf when no quota limits the chunk, and never
// negative.
//
// This is how a cluster admin bounds what a namespace may keep in
// CapacityBuffers: the chunks are spare capacity the namespace would use,
// so they may not exceed what its quota still allows it to run. Quotas with
// scopes (PriorityClass, BestEffort, ...) are skipped: a chunk is not a pod
// they could match.
func QuotaChunks(quotas []corev1.ResourceQuota, chunk corev1.PodSpec) float64 {
	pod := &corev1.Pod{Spec: chunk}
	requests := resource.PodRequests(pod, resource.PodResourcesOptions{})
	limits := resource.PodLimits(pod, resource.PodResourcesOptions{})
	n := math.Inf(1)
	for i := range quotas {
		q := &quotas[i]
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			continue
		}
		for name, hard := range q.Status.Hard {
			per := perChunk(name, requests, limits)
			if per <= 0 {
				continue
			}
			used := q.Status.Used[name]
			left := hard.AsApproximateFloat64() - used.AsApproximateFloat64()
			n = min(n, max(math.Floor(left/per), 0))
		}
	}
	return n
}

// perChunk is how much of a quota resource one chunk takes.
func perChunk(name corev1.ResourceName, requests, limits corev1.ResourceList) float64 {
	switch {
	case name == corev1.ResourcePods || name == "count/pods":
		return 1
	case strings.HasPrefix(string(name), "limits."):
		q := limits[corev1.ResourceName(strings.TrimPrefix(string(name), "limits."))]
		return q.AsApproximateFloat64()
	case strings.HasPrefix(string(name), "requests."):
		q := requests[corev1.ResourceName(strings.TrimPrefix(string(name), "requests."))]
		return q.AsApproximateFloat64()
	case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
		q := requests[name]
		return q.AsApproximateFloat64()
	}
	return 0
}
