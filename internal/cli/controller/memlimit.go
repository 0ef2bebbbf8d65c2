package controller

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// envMemoryLimit is the variable the chart sets to the container's memory
// limit in bytes (a resourceFieldRef on limits.memory).
const envMemoryLimit = "BERTH_MEMORY_LIMIT"

// memoryLimitShare is the part of the container's memory limit the Go
// heap is held under (Karpenter's controller uses the same 90 %): the rest
// is for what the runtime holds outside the heap (stacks, memory not yet
// returned to the system), so that the runtime collects harder before the
// kernel kills the container at its limit.
const memoryLimitShare = 0.9

// softMemoryLimit returns the soft memory limit to give the Go runtime:
// memoryLimitShare of BERTH_MEMORY_LIMIT, unless GOMEMLIMIT is set (the
// user's own, which the runtime read already) or the limit is not set.
func softMemoryLimit(getenv func(string) string) (int64, bool, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	v := getenv(envMemoryLimit)
	if v == "" {
		return 0, false, nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return 0, false, fmt.Errorf("%s=%q: want the container's memory limit in bytes", envMemoryLimit, v)
	}
	return int64(float64(limit) * memoryLimitShare), true, nil
}

// setSoftMemoryLimit applies softMemoryLimit to the runtime.
func setSoftMemoryLimit(getenv func(string) string) error {
	limit, ok, err := softMemoryLimit(getenv)
	if ok {
		debug.SetMemoryLimit(limit)
	}
	return err
}
