package headroom

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/resource"
)

// Chunks are a buffer's chunks as a namespace's quotas see them: the pod
// spec of one and how many berth keeps.
type Chunks struct {
	Spec  corev1.PodSpec
	Count int32
}

// QuotaChunks is how many chunks of a buffer the ResourceQuotas of its
// namespace leave room for, after what each quota counts as used and what
// the namespace's other buffers keep (others): for each quota whose scopes
// match the chunk and each resource it limits that a chunk uses (cpu and
// requests.cpu, memory and requests.memory, ephemeral-storage, extended
// resources as requests.<name>, limits.<name> against the chunk's limits,
// pods and count/pods one per chunk), what is left divided by what one
// chunk takes, rounded down. It is +Inf when no quota limits the chunk,
// and never negative.
//
// This is how a cluster admin bounds what a namespace may keep in
// CapacityBuffers: the chunks are spare capacity the namespace would use,
// so all its buffers together may not exceed what its quota still allows
// it to run. A scoped quota (BestEffort, NotBestEffort, Terminating,
// NotTerminating, PriorityClass, CrossNamespacePodAffinity) bounds the
// chunks it would count if they were pods, as the quota admission would.
func QuotaChunks(quotas []corev1.ResourceQuota, chunk corev1.PodSpec, others []Chunks) float64 {
	n := math.Inf(1)
	for i := range quotas {
		q := &quotas[i]
		if !quotaMatches(q, chunk) {
			continue
		}
		for name, hard := range q.Status.Hard {
			per := perChunk(name, chunk)
			if per.Sign() <= 0 {
				continue
			}
			used := q.Status.Used[name]
			// Exact: in floating point 600m / 200m is 2.999..., two chunks.
			left := new(inf.Dec).Sub(hard.AsDec(), used.AsDec())
			for _, o := range others {
				if quotaMatches(q, o.Spec) {
					op := perChunk(name, o.Spec)
					left.Sub(left, new(inf.Dec).Mul(op.AsDec(), inf.NewDec(int64(max(o.Count, 0)), 0)))
				}
			}
			n = min(n, max(wholeChunks(left, per.AsDec()), 0))
		}
	}
	return n
}

// QuotasBelow names the ResourceQuotas that alone leave room for fewer
// than want chunks (QuotaChunks): those that cut a buffer.
func QuotasBelow(quotas []corev1.ResourceQuota, chunk corev1.PodSpec, others []Chunks, want int32) []string {
	var out []string
	for i := range quotas {
		if QuotaChunks(quotas[i:i+1], chunk, others) < float64(want) {
			out = append(out, quotas[i].Name)
		}
	}
	return out
}

// wholeChunks is how many whole chunks of per fit in left, exactly
// (rounded toward zero). A count past what a float64 holds (a limit of
// 1e306 cpu and a chunk of 1m) is +Inf: as many as the caller's cap.
func wholeChunks(left, per *inf.Dec) float64 {
	f, err := strconv.ParseFloat(new(inf.Dec).QuoRound(left, per, 0, inf.RoundDown).String(), 64)
	if errors.Is(err, strconv.ErrRange) {
		return f // ±Inf, as ParseFloat returns it out of range
	}
	if err != nil {
		return 0
	}
	return f
}

// perChunk is how much of a quota resource one chunk takes.
func perChunk(name corev1.ResourceName, chunk corev1.PodSpec) apiresource.Quantity {
	pod := &corev1.Pod{Spec: chunk}
	switch {
	case name == corev1.ResourcePods || name == "count/pods":
		return *apiresource.NewQuantity(1, apiresource.DecimalSI)
	case strings.HasPrefix(string(name), "limits."):
		return resource.PodLimits(pod, resource.PodResourcesOptions{})[corev1.ResourceName(strings.TrimPrefix(string(name), "limits."))]
	case strings.HasPrefix(string(name), "requests."):
		return resource.PodRequests(pod, resource.PodResourcesOptions{})[corev1.ResourceName(strings.TrimPrefix(string(name), "requests."))]
	case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
		return resource.PodRequests(pod, resource.PodResourcesOptions{})[name]
	}
	return apiresource.Quantity{}
}

// quotaMatches reports whether the quota counts a pod of this spec: every
// scope and scope selector requirement matches, as the quota admission
// decides for pods.
func quotaMatches(q *corev1.ResourceQuota, spec corev1.PodSpec) bool {
	for _, s := range q.Spec.Scopes {
		if !scopeMatches(corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}, spec) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, r := range q.Spec.ScopeSelector.MatchExpressions {
			if !scopeMatches(r, spec) {
				return false
			}
		}
	}
	return true
}

func scopeMatches(r corev1.ScopedResourceSelectorRequirement, spec corev1.PodSpec) bool {
	switch r.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds >= 0
	case corev1.ResourceQuotaScopeNotTerminating:
		return spec.ActiveDeadlineSeconds == nil || *spec.ActiveDeadlineSeconds < 0
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(spec)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(spec)
	case corev1.ResourceQuotaScopePriorityClass:
		return selects(r, spec.PriorityClassName)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(spec)
	}
	return false // a scope that does not apply to pods
}

// selects applies a PriorityClass requirement to a class name.
func selects(r corev1.ScopedResourceSelectorRequirement, class string) bool {
	in := false
	for _, v := range r.Values {
		in = in || v == class
	}
	switch r.Operator {
	case corev1.ScopeSelectorOpIn:
		return in
	case corev1.ScopeSelectorOpNotIn:
		return !in
	case corev1.ScopeSelectorOpExists:
		return class != ""
	case corev1.ScopeSelectorOpDoesNotExist:
		return class == ""
	}
	return false
}

// bestEffort reports whether no container requests or limits anything.
func bestEffort(spec corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
				return false
			}
		}
	}
	return true
}

// crossNamespaceAffinity reports whether a pod (anti-)affinity term names
// namespaces or a namespace selector.
func crossNamespaceAffinity(spec corev1.PodSpec) bool {
	a := spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
