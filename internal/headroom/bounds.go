package headroom

import "math"

// MaxUnits caps the units of one Headroom and the chunks of one
// CapacityBuffer. It is the API's own maximum for a manual count; automatic
// headroom, percentages and limits can ask for far more (a 200 % headroom of
// 1-byte units over a GiB of workload is two billion units), and every unit
// is a pod in each plan, so the count is cut here and the cut reported.
const MaxUnits int32 = 10000

// clampUnits bounds a count computed in floating point to [0, MaxUnits],
// NaN and negative values to 0. It reports whether the count was cut.
func clampUnits(n float64) (int32, bool) {
	switch {
	case math.IsNaN(n) || n <= 0:
		return 0, false
	case n > float64(MaxUnits):
		return MaxUnits, true
	}
	return int32(n), false
}
