package snapshot

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources is a request or capacity vector in the units the scheduler
// uses: millicores, bytes, and integer counts for extended resources. Pod
// count is tracked separately (Node.AllowedPods, len(Node.Pods)).
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// Scalar holds extended resources (e.g. nvidia.com/gpu) and hugepages;
	// nil when there are none.
	Scalar map[corev1.ResourceName]int64
}

// isScalar reports whether the scheduler accounts a resource as a scalar:
// extended resources (domain-prefixed names) and hugepages. Other names
// (e.g. "storage") are ignored, as kube-scheduler ignores them.
func isScalar(name corev1.ResourceName) bool {
	return strings.Contains(string(name), "/") || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// FromList converts a ResourceList, each quantity as kube-scheduler reads
// it (MilliValue for cpu, Value for the others, which wrap past what an
// int64 holds). saturate makes such a quantity the most an int64 holds
// instead, as a limit must read it (NewLimit).
func FromList(rl corev1.ResourceList) Resources { return fromList(rl, false) }

func fromList(rl corev1.ResourceList, saturate bool) Resources {
	read := func(q resource.Quantity, most, least resource.Quantity, value func() int64) int64 {
		if saturate {
			return saturated(q, most, least, value)
		}
		return value()
	}
	var r Resources
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = read(q, maxMilli, minMilli, q.MilliValue)
		case corev1.ResourceMemory:
			r.Memory = read(q, maxUnits, minUnits, q.Value)
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = read(q, maxUnits, minUnits, q.Value)
		case corev1.ResourcePods:
			// A type's pod slots are its AllowedPods, not a resource.
		default:
			if isScalar(name) {
				if r.Scalar == nil {
					r.Scalar = map[corev1.ResourceName]int64{}
				}
				r.Scalar[name] = read(q, maxUnits, minUnits, q.Value)
			}
		}
	}
	return r
}

// The quantities at the ends of int64, in millicores and in units.
var (
	maxMilli = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	minMilli = *resource.NewMilliQuantity(math.MinInt64, resource.DecimalSI)
	maxUnits = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	minUnits = *resource.NewQuantity(math.MinInt64, resource.DecimalSI)
)

// saturated is value() of q, or the end of int64 q lies beyond.
func saturated(q, most, least resource.Quantity, value func() int64) int64 {
	switch {
	case q.Cmp(most) >= 0:
		return math.MaxInt64
	case q.Cmp(least) <= 0:
		return math.MinInt64
	}
	return value()
}

// IsZero reports whether nothing is requested.
func (r *Resources) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.EphemeralStorage != 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v != 0 {
			return false
		}
	}
	return true
}

// Add adds o to r.
func (r *Resources) Add(o *Resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	if len(o.Scalar) == 0 {
		return
	}
	if r.Scalar == nil {
		r.Scalar = make(map[corev1.ResourceName]int64, len(o.Scalar))
	}
	for k, v := range o.Scalar {
		r.Scalar[k] += v
	}
}

// Sub subtracts o from r.
func (r *Resources) Sub(o *Resources) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	if len(o.Scalar) == 0 {
		return
	}
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[corev1.ResourceName]int64{}
		}
		r.Scalar[k] -= v
	}
}

// Max raises each component of r to at least o's.
func (r *Resources) Max(o *Resources) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	if len(o.Scalar) == 0 {
		return
	}
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[corev1.ResourceName]int64{}
		}
		r.Scalar[k] = max(r.Scalar[k], v)
	}
}

// Clone returns a deep copy.
func (r Resources) Clone() Resources {
	if r.Scalar != nil {
		s := make(map[corev1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			s[k] = v
		}
		r.Scalar = s
	}
	return r
}

// Shortfall is one resource a pod needs more of than a node has free.
type Shortfall struct {
	Resource corev1.ResourceName
	// Requested by the pod, Free on the node (allocatable minus requested),
	// Allocatable of the node.
	Requested, Free, Allocatable int64
}

// Shortfalls lists the resources of req that do not fit in free = alloc -
// used, in the scheduler's order (cpu, memory, ephemeral-storage, scalars
// by name). A zero request always fits, as in kube-scheduler.
func Shortfalls(req, used, alloc *Resources) []Shortfall {
	var out []Shortfall
	check := func(name corev1.ResourceName, r, u, a int64) {
		if r > 0 && r > a-u {
			out = append(out, Shortfall{Resource: name, Requested: r, Free: a - u, Allocatable: a})
		}
	}
	check(corev1.ResourceCPU, req.MilliCPU, used.MilliCPU, alloc.MilliCPU)
	check(corev1.ResourceMemory, req.Memory, used.Memory, alloc.Memory)
	check(corev1.ResourceEphemeralStorage, req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage)
	if len(req.Scalar) > 0 {
		names := make([]string, 0, len(req.Scalar))
		for k := range req.Scalar {
			names = append(names, string(k))
		}
		sort.Strings(names)
		for _, k := range names {
			n := corev1.ResourceName(k)
			check(n, req.Scalar[n], used.Scalar[n], alloc.Scalar[n])
		}
	}
	return out
}

// Fits reports whether req fits in alloc - used (the fast path of
// Shortfalls).
func Fits(req, used, alloc *Resources) bool {
	if req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		return false
	}
	if req.Memory > 0 && req.Memory > alloc.Memory-used.Memory {
		return false
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		return false
	}
	if len(req.Scalar) == 0 {
		return true
	}
	for k, v := range req.Scalar {
		if v > 0 && v > alloc.Scalar[k]-used.Scalar[k] {
			return false
		}
	}
	return true
}

// fitsWithOverhead is Fits with used + overhead as the used amount,
// without allocating.
func fitsWithOverhead(req, used, overhead, alloc *Resources) bool {
	if req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU-overhead.MilliCPU {
		return false
	}
	if req.Memory > 0 && req.Memory > alloc.Memory-used.Memory-overhead.Memory {
		return false
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage-overhead.EphemeralStorage {
		return false
	}
	if len(req.Scalar) == 0 { // skips starting an iterator: a hot path
		return true
	}
	for k, v := range req.Scalar {
		if v > 0 && v > alloc.Scalar[k]-used.Scalar[k]-overhead.Scalar[k] {
			return false
		}
	}
	return true
}

// FormatQuantity renders an amount of a resource for messages: cores for
// cpu, binary units for bytes.
func FormatQuantity(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		if v%1000 == 0 {
			return fmt.Sprintf("%d", v/1000)
		}
		return fmt.Sprintf("%dm", v)
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return formatBytes(v)
	default:
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			return formatBytes(v)
		}
		return fmt.Sprintf("%d", v)
	}
}

func formatBytes(v int64) string {
	const unit = 1024
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	i := 0
	for i < len(units)-1 && v != 0 && v%unit == 0 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%d%s", v, units[i])
}
