package scaleup_test

import (
	"math/rand/v2"
	"testing"

	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// BenchmarkPlanSmall plans the first 500 clusters of the cost-quality
// test (up to 10 pending pods, 1-3 node groups, a few existing nodes)
// per iteration: the rounds small enough for an exact search. It reports
// rounds/sec.
func BenchmarkPlanSmall(b *testing.B) {
	const n = 500
	cases := make([]qCase, n)
	for i := range cases {
		cases[i] = genCase(rand.New(rand.NewPCG(uint64(i+1), 0)))
	}
	for b.Loop() {
		for i := range cases {
			if _, err := scaleup.Run(cases[i].in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rounds/sec")
}
