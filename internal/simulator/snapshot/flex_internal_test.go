package snapshot

import (
	"math"
	"math/rand"
	"testing"
)

// TestHoldsAllOnlyWhenEveryOptionHolds: narrow skips looking at a planned
// node's options one by one when holdsAll says that every option holds
// the node's pods and the new pod and is within the limits. On random
// options, nodes, pods and limit rooms, whenever it says so, each option
// must pass what narrow checks (FitsOption, AllowsOption); and it must
// say so often enough to matter.
func TestHoldsAllOnlyWhenEveryOptionHolds(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	gi := int64(1) << 30
	said := 0
	const trials = 20000
	for range trials {
		var opts []*Option
		for range 1 + r.Intn(6) {
			cpu := int64(1000 * (1 + r.Intn(16)))
			opts = append(opts, &Option{
				Allocatable:  Resources{MilliCPU: cpu, Memory: 2 * gi * cpu / 1000, EphemeralStorage: 100 * gi},
				AllowedPods:  10 + r.Intn(100),
				Overhead:     Resources{MilliCPU: int64(r.Intn(300)), Memory: int64(r.Intn(512)) << 20},
				OverheadPods: r.Intn(3),
			})
		}
		f := &Flex{Options: opts}
		used := Resources{MilliCPU: int64(r.Intn(4000)), Memory: int64(r.Intn(8)) * gi}
		n := &Node{Requested: used, podCount: r.Intn(12)}
		req := Resources{MilliCPU: int64(r.Intn(2000)), Memory: int64(r.Intn(4096)) << 20}
		if r.Intn(4) == 0 {
			req.EphemeralStorage = int64(r.Intn(200)) * gi
		}
		h := LimitRoom{cpu: math.MaxInt64, memory: math.MaxInt64, storage: math.MaxInt64, pods: math.MaxInt64}
		if r.Intn(3) == 0 {
			h.cpu = int64(1000 * (1 + r.Intn(16)))
		}
		if r.Intn(5) == 0 {
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
