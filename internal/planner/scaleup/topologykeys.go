package scaleup

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// A node group's options in one zone may differ in the labels OptionKeys
// name (spot and on-demand, amd64 and arm64, several instance types). A
// planned node keeps all its options open until packing ends, so it cannot
// carry those labels while it is planned. Node selection reads them per
// option (snapshot.Snapshot.ReferencesOptionKeys), but a topology key
// cannot: spread, pod affinity and anti-affinity count pods per value of
// the key, and a node without the label is in no domain (kube-scheduler
// skips it for spread and affinity, and never sees a conflict on it for
// anti-affinity). So when a topology term of the round names an option
// key, the planner commits the key at the moment a node is opened: the
// group's options in a zone are split by the key's values into templates
// of their own, exactly as they are split by zone, and every planned node
// carries the value it will be launched with.

// topologyOptionKeys returns the option keys that a topology term of the
// round names: the spread constraints (DoNotSchedule and ScheduleAnyway)
// and pod (anti-)affinity terms (required and preferred) of the pending
// pods, and the anti-affinity terms of the bound pods (which keep pending
// pods out of their domains).
func topologyOptionKeys(pending, bound []*corev1.Pod) []string {
	keys := sets.New[string]()
	for _, p := range pending {
		addTopologyKeys(keys, p, true)
	}
	for _, p := range bound {
		addTopologyKeys(keys, p, false)
	}
	var out []string
	for _, k := range OptionKeys {
		if keys.Has(k) {
			out = append(out, k)
		}
	}
	return out
}

// addTopologyKeys adds the topology keys of p's terms: all of them for a
// pending pod, only its anti-affinity terms for a bound one.
func addTopologyKeys(keys sets.Set[string], p *corev1.Pod, pending bool) {
	if pending {
		for _, c := range p.Spec.TopologySpreadConstraints {
			keys.Insert(c.TopologyKey)
		}
	}
	a := p.Spec.Affinity
	if a == nil {
		return
	}
	if a.PodAntiAffinity != nil {
		addTerms(keys, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pending && a.PodAffinity != nil {
		addTerms(keys, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
}

func addTerms(keys sets.Set[string], required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
	for _, t := range required {
		keys.Insert(t.TopologyKey)
	}
	for _, t := range preferred {
		keys.Insert(t.PodAffinityTerm.TopologyKey)
	}
}

// splitByKeys partitions a zone's options by their values of keys, in the
// order the options are listed (so that templates are built in a stable
// order); with no keys, all options are one part.
func splitByKeys(opts []*snapshot.Option, keys []string) [][]*snapshot.Option {
	if len(keys) == 0 {
		return [][]*snapshot.Option{opts}
	}
	var (
		parts  [][]*snapshot.Option
		values [][]string
	)
	for _, o := range opts {
		v := make([]string, len(keys))
		for i, k := range keys {
			v[i] = o.Node.Labels[k]
		}
		i := slices.IndexFunc(values, func(have []string) bool { return slices.Equal(have, v) })
		if i < 0 {
			values = append(values, v)
			parts = append(parts, nil)
			i = len(parts) - 1
		}
		parts[i] = append(parts[i], o)
	}
	return parts
}

// placedExamples are a pod of each class placed in s: the bound pods'
// classes, whose pods share their (anti-)affinity terms.
func placedExamples(s *snapshot.Snapshot) []*corev1.Pod {
	var out []*corev1.Pod
	for _, c := range s.Classes() {
		if c.Placed() > 0 {
			out = append(out, c.Example)
		}
	}
	return out
}
