package scaleup_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

var (
	qualityCases = flag.Int("quality-cases", 1000, "random clusters in TestPlanCostQuality (thousands on demand)")
	qualitySeed  = flag.Uint64("quality-seed", 1, "first seed of TestPlanCostQuality")
)

// TestPlanCostQuality plans seeded random small clusters (up to 10 pending
// pods, 1-3 node groups, 1-5 instance types each with DaemonSet overhead,
// spot and on-demand, one or two zones, up to 6 existing nodes with room,
// maxSizes that bind, node selectors, taints, anti-affinity and zone
// spread) and compares each plan with the
// cheapest one an exhaustive search finds. A plan must always be valid,
// at least 95 % must cost the optimum and none more than 1.25 times it.
//
//	go test ./internal/planner/scaleup/ -run TestPlanCostQuality -v -args -quality-cases 5000
func TestPlanCostQuality(t *testing.T) {
	var (
		optimal, searched, skipped, over, infeasible int
		buckets                                              = map[string]int{}
		worst                                        float64 = 1
		worstSeed                                    uint64
	)
	for i := range *qualityCases {
		seed := *qualitySeed + uint64(i)
		c := genCase(rand.New(rand.NewPCG(seed, 0)))
		plan, err := scaleup.Run(c.in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(plan.Unschedulable) > 0 {
			// A maxSize can leave no room for every pod: berth may leave
			// pods out only when no plan places them all.
			switch price, ok := feasible(&c); {
			case !ok:
				skipped++
			case math.IsInf(price, 1):
				infeasible++
			default:
				t.Errorf("seed %d: pod %s left unschedulable (%s), but a plan placing every pod exists (one costs %.4f)\n%s",
					seed, plan.Unschedulable[0].Pod, plan.Unschedulable[0].Message, price, describe(&c, plan))
			}
			continue
		}
		if err := checkPlan(&c, plan); err != nil {
			t.Errorf("seed %d: invalid plan: %v\n%s", seed, err, describe(&c, plan))
			continue
		}
		best, ok := optimum(&c, plan.PricePerHour)
		if !ok {
			skipped++
			continue
		}
		searched++
		ratio := 1.0
		if best < plan.PricePerHour-1e-9 {
			ratio = plan.PricePerHour / best
		} else {
			optimal++
		}
		buckets[bucket(ratio)]++
		if ratio > worst {
			worst, worstSeed = ratio, seed
		}
		if ratio > 1.25 {
			over++
			t.Logf("seed %d: plan costs %.4f, %.2fx the optimum %.4f\n%s", seed, plan.PricePerHour, ratio, best, describe(&c, plan))
		}
	}
	t.Logf("%d clusters (%d skipped: search too large; %d where no plan places every pod): %d optimal (%.2f %%), worst %.3fx (seed %d)",
		searched, skipped, infeasible, optimal, 100*float64(optimal)/float64(max(searched, 1)), worst, worstSeed)
	for _, b := range qBuckets {
		t.Logf("  %-12s %d", b, buckets[b])
	}
	if searched == 0 || float64(optimal) < 0.95*float64(searched) {
		t.Errorf("%d of %d plans cost the optimum, want at least 95 %%", optimal, searched)
	}
	if over > 0 {
		t.Errorf("%d of %d plans cost more than 1.25x the optimum, want none", over, searched)
	}
}

var qBuckets = []string{"optimal", "<=1.05x", "<=1.10x", "<=1.25x", ">1.25x"}

func bucket(r float64) string {
	switch {
	case r <= 1:
		return qBuckets[0]
	case r <= 1.05:
		return qBuckets[1]
	case r <= 1.10:
		return qBuckets[2]
	case r <= 1.25:
		return qBuckets[3]
	}
	return qBuckets[4]
}

// describe prints a case and berth's plan for a failure message.
func describe(c *qCase, plan *scaleup.Plan) string {
	var b strings.Builder
	for _, cfg := range c.configs {
		fmt.Fprintf(&b, "  offering %s/%s/%s/%s %.4f/h free %dm %dMi tainted=%v\n", cfg.group, cfg.instanceType, cfg.zone, cfg.capacityType, cfg.price, cfg.cpu, cfg.mem>>20, cfg.tainted)
	}
	for g, ng := range c.in.NodeGroups {
		fmt.Fprintf(&b, "  group %s maxSize %d, room for %d more\n", ng.Name, ng.Spec.MaxSize, c.room[g])
	}
	for _, n := range c.existing {
		fmt.Fprintf(&b, "  existing %s (%s %s) free %dm %dMi tainted=%v\n", n.name, n.labels[v1alpha1.LabelInstanceType], n.labels[v1alpha1.LabelZone], n.cpu, n.mem>>20, n.tainted)
	}
	for _, p := range c.pods {
		fmt.Fprintf(&b, "  pod %s %dm %dMi selector=%v tolerates=%v anti=%v spread=%v\n", p.name, p.cpu, p.mem>>20, p.selector, p.tolerates, p.anti >= 0, p.spread)
	}
	for _, pl := range plan.ExistingNodePlacements {
		fmt.Fprintf(&b, "  plan: %s -> %s\n", pl.Pod.Name, pl.Node)
	}
	for _, n := range plan.NewNodes {
		fmt.Fprintf(&b, "  plan: new %s %s/%s/%s/%s %.4f: %v\n", n.Name, n.NodeGroup, n.InstanceType, n.Zone, n.CapacityType, n.PricePerHour, n.Pods)
	}
	return b.String()
}
