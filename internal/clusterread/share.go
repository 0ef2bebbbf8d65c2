package clusterread

import (
	"cmp"
	"slices"

	"github.com/berth-dev/berth/internal/state"
)

// Share splits max units among the sets, without making any: Headrooms
// first (they are cluster-wide and only an administrator creates them),
// then CapacityBuffers, shared fairly across namespaces (every namespace
// gets the same share, or what it asks for if less), and within a
// namespace fairly across its buffers. The result is per set, in the
// sets' order.
func Share(sets []Set, max int) []int32 {
	out := make([]int32, len(sets))
	var headrooms []int
	byNamespace := map[string][]int{}
	for i, s := range sets {
		if s.Key.Owner == state.OwnerHeadroom {
			headrooms = append(headrooms, i)
		} else {
			byNamespace[s.Key.Namespace] = append(byNamespace[s.Key.Namespace], i)
		}
	}
	left := int64(max)
	left -= fill(sets, headrooms, left, out)
	namespaces := make([]string, 0, len(byNamespace))
	demand := make([]int64, 0, len(byNamespace))
	for ns := range byNamespace {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		d := int64(0)
		for _, i := range byNamespace[ns] {
			d += int64(sets[i].Count)
		}
		demand = append(demand, d)
	}
	for k, share := range waterFill(demand, left) {
		fill(sets, byNamespace[namespaces[k]], share, out)
	}
	return out
}

// fill shares budget fairly among the sets idx (by their Count) into out
// and returns what it gave.
func fill(sets []Set, idx []int, budget int64, out []int32) int64 {
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(sets[a].Key.Namespace, sets[b].Key.Namespace), cmp.Compare(sets[a].Key.Name, sets[b].Key.Name))
	})
	demand := make([]int64, len(idx))
	for k, i := range idx {
		demand[k] = int64(sets[i].Count)
	}
	given := int64(0)
	for k, n := range waterFill(demand, budget) {
		out[idx[k]] = int32(n)
		given += n
	}
	return given
}

// waterFill gives each demand min(demand, level) for the highest level
// the budget allows, and the units left over one each to the first
// unsatisfied demands: max-min fair.
func waterFill(demand []int64, budget int64) []int64 {
	out := make([]int64, len(demand))
	total := int64(0)
	for _, d := range demand {
		total += max(d, 0)
	}
	if total <= budget {
		for i, d := range demand {
			out[i] = max(d, 0)
		}
		return out
	}
	if budget <= 0 {
		return out
	}
	sorted := slices.Clone(demand)
	slices.Sort(sorted)
	level, left, rest := int64(0), budget, int64(len(sorted))
	for _, d := range sorted {
		if (d-level)*rest > left {
			level += left / rest
			break
		}
		left -= (d - level) * rest
		level = d
		rest--
	}
	given := int64(0)
	for i, d := range demand {
		out[i] = min(max(d, 0), level)
		given += out[i]
	}
	for i, d := range demand {
		if given >= budget {
			break
		}
		if out[i] < d {
			out[i]++
			given++
		}
	}
	return out
}
