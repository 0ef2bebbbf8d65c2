package snapshot

import (
	"math"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestHoldsAllOnlyWhenEveryOptionHolds: narrow skips looking at a planned
// node's options one by one when holdsAll says that every option holds
// the node's pods and the new pod and is within the limits. On random
// options (some with GPUs), nodes, pods (some asking for GPUs) and limit
// rooms (of cpu, memory, storage, GPUs and pods), whenever it says so,
// each option must pass what narrow checks (FitsOption, AllowsOption);
// and it must say so often enough to matter.
func TestHoldsAllOnlyWhenEveryOptionHolds(t *testing.T) {
	const gpu = corev1.ResourceName("nvidia.com/gpu")
	r := rand.New(rand.NewSource(1))
	gi := int64(1) << 30
	said := 0
	const trials = 20000
	for range trials {
		var opts []*Option
		for range 1 + r.Intn(6) {
			cpu := int64(1000 * (1 + r.Intn(16)))
			o := &Option{
				Allocatable:  Resources{MilliCPU: cpu, Memory: 2 * gi * cpu / 1000, EphemeralStorage: int64(50+r.Intn(100)) * gi},
				AllowedPods:  10 + r.Intn(100),
				Overhead:     Resources{MilliCPU: int64(r.Intn(300)), Memory: int64(r.Intn(512)) << 20},
				OverheadPods: r.Intn(3),
			}
			if r.Intn(3) == 0 {
				o.Allocatable.Scalar = map[corev1.ResourceName]int64{gpu: int64(r.Intn(8))}
			}
			opts = append(opts, o)
		}
		f := &Flex{Options: opts}
		used := Resources{MilliCPU: int64(r.Intn(4000)), Memory: int64(r.Intn(8)) * gi}
		n := &Node{Requested: used, podCount: r.Intn(12)}
		req := Resources{MilliCPU: int64(r.Intn(2000)), Memory: int64(r.Intn(4096)) << 20}
		if r.Intn(4) == 0 {
			req.EphemeralStorage = int64(r.Intn(200)) * gi
		}
		if r.Intn(8) == 0 {
			req.Scalar = map[corev1.ResourceName]int64{gpu: int64(r.Intn(3))}
		}
		h := LimitRoom{cpu: math.MaxInt64, memory: math.MaxInt64, storage: math.MaxInt64, pods: math.MaxInt64}
		switch r.Intn(6) {
		case 0:
			h.cpu = int64(1000 * (1 + r.Intn(16)))
		case 1:
			h.memory = int64(2*(1+r.Intn(16))) * gi
		case 2:
			h.storage = int64(50+r.Intn(100)) * gi
		case 3:
			h.scalar = map[corev1.ResourceName]int64{gpu: int64(r.Intn(8))}
		case 4:
			h.pods = int64(10 + r.Intn(100))
		}
		pods := 1 + r.Intn(2)
		if !f.holdsAll(&n.Requested, n.podCount, &req, pods, &h) {
			continue
		}
		said++
		for i, o := range opts {
			if !n.FitsOption(o, &req, pods) || !h.AllowsOption(o) {
				t.Fatalf("holdsAll said every option holds a pod of %+v next to %+v (%d pods) within %+v; option %d (%+v) does not",
					req, used, n.podCount, h, i, *o)
			}
		}
	}
	if said < trials/10 {
		t.Fatalf("holdsAll said every option holds in %d of %d trials; the test checks too little", said, trials)
	}
}
