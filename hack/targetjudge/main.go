// Command targetjudge is the simulator judging target-driven headroom
// (issue: headroom sized from a wait-time goal): on a day of each
// synthetic trace family, it simulates sweeps of fixed unit counts and
// automatic percentages and, for each wait-time target, a Headroom with
// that target that learned from another day of the same family (another
// seed), and prints the cheapest fixed setting that meets the target
// beside the target-driven one.
//
// With -standby it also runs each target with spec.standby: the units
// the first part of a burst needs run, the rest wait on suspended nodes
// at their stopped price.
//
//	go run ./hack/targetjudge [-families diurnal,ci,batch,mix] [-targets 5s:95,5s:90] [-standby] [-out results.json]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/scenario"
	"github.com/berth-dev/berth/internal/sim"
	"github.com/berth-dev/berth/internal/trace"
)

type target struct {
	wait    time.Duration
	percent int32
}

func (t target) String() string { return fmt.Sprintf("p%d <= %s", t.percent, t.wait) }

// unit is the shape a family's units take: the shape of its bursting
// pods (mix: the CI jobs').
var unit = map[string][2]string{
	trace.FamilyDiurnal: {"500m", "1Gi"}, trace.FamilyCI: {"1", "2Gi"}, trace.FamilyBatch: {"2", "4Gi"}, trace.FamilyMix: {"1", "2Gi"},
}

var (
	fixedUnits = []int32{0, 2, 4, 8, 12, 16, 24, 32, 40, 48, 64, 80, 96, 128}
	autoPct    = []int32{5, 10, 20, 30, 50, 75, 100, 150, 200}
	targets    []target
	// withStandby also runs each target with spec.standby (-standby).
	withStandby bool
	// withOneShape also runs each target with spec.target.shapes Unit
	// (-one-shape): every pod counted in the Headroom's one unit.
	withOneShape bool
)

type run struct {
	Family, Policy string
	Cost           float64
	// Within is the share of pods within each target's wait (by wait).
	Within map[string]float64
	Target *sim.TargetResult `json:",omitempty"`
	// Resumes are standby nodes resumed instead of launches.
	Resumes int `json:",omitempty"`
}

// standbySuffix names a target run with spec.standby; oneShapeSuffix one
// with spec.target.shapes Unit.
const (
	standbySuffix  = " +standby"
	oneShapeSuffix = " one shape"
)

// The days judged and learned from (-seed, -learn-seed).
var evalSeed, learnSeed uint64

func main() {
	families := flag.String("families", strings.Join(trace.Families, ","), "families to judge")
	cluster := flag.String("cluster", "config/simulate/cluster.yaml", "the cluster's node groups")
	out := flag.String("out", "", "write every run as JSON here")
	flag.Uint64Var(&evalSeed, "seed", 1, "the seed of the day judged")
	flag.Uint64Var(&learnSeed, "learn-seed", 2, "the seed of the day the targets learn from")
	sweep := flag.Bool("sweep", true, "run the fixed settings too (without, only the targets: a quick look at the estimator)")
	flag.BoolVar(&withStandby, "standby", false, "also run each target with spec.standby (units on suspended nodes)")
	flag.BoolVar(&withOneShape, "one-shape", false, "also run each target with spec.target.shapes Unit (no shapes learned besides the unit)")
	goals := flag.String("targets", "5s:95,5s:90", "the targets judged, wait:percent, comma-separated")
	flag.Parse()
	targets = nil
	for _, g := range strings.Split(*goals, ",") {
		wait, pct, ok := strings.Cut(g, ":")
		d, err := time.ParseDuration(wait)
		p, perr := strconv.Atoi(pct)
		if !ok || err != nil || perr != nil || p < 50 || p > 100 || d <= 0 {
			check(fmt.Errorf("-targets: %q is not wait:percent (e.g. 5s:95)", g))
		}
		targets = append(targets, target{d, int32(p)})
	}
	f, err := os.Open(*cluster)
	check(err)
	sc, err := scenario.Load(f)
	check(err)
	_ = f.Close()
	var all []run
	for _, family := range strings.Split(*families, ",") {
		runs := judge(family, sc.NodeGroups, *sweep)
		all = append(all, runs...)
		report(family, runs)
	}
	if *out != "" {
		b, err := json.MarshalIndent(all, "", "  ")
		check(err)
		check(os.WriteFile(*out, b, 0o644))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "targetjudge:", err)
		os.Exit(1)
	}
}

func generate(family string, seed uint64) []byte {
	h, events, err := trace.Generate(trace.Params{Family: family, Seed: seed})
	check(err)
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, h)
	check(err)
	for _, e := range events {
		check(w.Write(e))
	}
	check(w.Flush())
	return buf.Bytes()
}

func headroom(family string) *v1alpha1.Headroom {
	u := unit[family]
	return &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "spare"}, Spec: v1alpha1.HeadroomSpec{
		Units: &v1alpha1.HeadroomUnits{UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(u[0]), corev1.ResourceMemory: resource.MustParse(u[1])}}}}}
}

func simulate(data []byte, cfg sim.Config) *sim.Result {
	r, err := trace.NewReader(bytes.NewReader(data))
	check(err)
	res, err := sim.Run(cfg, r)
	check(err)
	return res
}

// judge runs every policy of one family, two at a time.
func judge(family string, groups []*v1alpha1.NodeGroup, sweep bool) []run {
	eval, learn := generate(family, evalSeed), generate(family, learnSeed)
	type job struct {
		name string
		h    *v1alpha1.Headroom
	}
	var jobs []job
	fixed, auto := fixedUnits, autoPct
	if !sweep {
		fixed, auto = nil, nil
	}
	for _, n := range fixed {
		h := headroom(family)
		h.Spec.Units.Count = n
		jobs = append(jobs, job{fmt.Sprintf("units %d", n), h})
	}
	if withStandby {
		for _, n := range fixed {
			h := headroom(family)
			h.Spec.Standby = &v1alpha1.StandbyHeadroom{Count: n}
			jobs = append(jobs, job{fmt.Sprintf("standby %d", n), h})
		}
	}
	for _, p := range auto {
		h := headroom(family)
		h.Spec.Automatic = &v1alpha1.AutomaticHeadroom{Percentage: p, Unit: &h.Spec.Units.UnitShape}
		h.Spec.Units = nil
		jobs = append(jobs, job{fmt.Sprintf("automatic %d%%", p), h})
	}
	for _, t := range targets {
		h := headroom(family)
		h.Spec.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: t.wait}, Percent: t.percent}
		jobs = append(jobs, job{"target " + t.String(), h})
		if withOneShape {
			h := h.DeepCopy()
			h.Spec.Target.Shapes = v1alpha1.TargetShapesUnit
			jobs = append(jobs, job{"target " + t.String() + oneShapeSuffix, h})
		}
		if withStandby {
			h = h.DeepCopy()
			h.Spec.Standby = &v1alpha1.StandbyHeadroom{}
			jobs = append(jobs, job{"target " + t.String() + standbySuffix, h})
		}
	}
	runs := make([]run, len(jobs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cfg := sim.Config{Name: j.name, NodeGroups: groups, Headrooms: []*v1alpha1.Headroom{j.h}}
			if j.h.Spec.Target != nil {
				learned := simulate(learn, cfg)
				cfg.Histories, cfg.BurstHistories, cfg.Shapes = learned.Histories, learned.BurstHistories, learned.Shapes
			}
			res := simulate(eval, cfg)
			r := run{Family: family, Policy: j.name, Cost: res.Cost, Within: map[string]float64{}, Target: res.Target, Resumes: res.Resumes}
			for _, t := range targets {
				r.Within[t.wait.String()] = res.Within(t.wait.Seconds())
			}
			runs[i] = r
			fmt.Fprintf(os.Stderr, "%s %-20s cost %7.2f within 5s %5.1f%%\n", family, j.name, res.Cost, 100*r.Within["5s"])
		}()
	}
	wg.Wait()
	return runs
}

// report prints, per target, the cheapest fixed setting that meets it
// (units and automatic separately) and the target-driven run.
func report(family string, runs []run) {
	fmt.Printf("\n### %s\n\n| target | cheapest fixed units meeting it | cheapest automatic meeting it | target-driven | saving vs best fixed |\n|---|---|---|---|---|\n", family)
	defer reportStandby(runs)
	for _, t := range targets {
		share := float64(t.percent) / 100
		var bestUnits, bestAuto, driven *run
		for i := range runs {
			r := &runs[i]
			within := r.Within[t.wait.String()]
			switch {
			case strings.HasPrefix(r.Policy, "units") && within >= share && (bestUnits == nil || r.Cost < bestUnits.Cost):
				bestUnits = r
			case strings.HasPrefix(r.Policy, "automatic") && within >= share && (bestAuto == nil || r.Cost < bestAuto.Cost):
				bestAuto = r
			case r.Policy == "target "+t.String():
				driven = r
			}
		}
		cell := func(r *run) string {
			if r == nil {
				return "none of the sweep"
			}
			return fmt.Sprintf("%s: %.2f, %.1f%%", r.Policy, r.Cost, 100*r.Within[t.wait.String()])
		}
		best := bestUnits
		if best == nil || (bestAuto != nil && bestAuto.Cost < best.Cost) {
			best = bestAuto
		}
		d := "-"
		if driven != nil {
			d = variant(driven, t, share, fmt.Sprintf("%d units at the end", driven.Target.Units))
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", t, cell(bestUnits), cell(bestAuto), d, savingOf(best, driven))
		for i := range runs {
			r := &runs[i]
			switch r.Policy {
			case "target " + t.String() + oneShapeSuffix:
				fmt.Printf("| %s, one shape | | | %s | %s |\n", t, variant(r, t, share, fmt.Sprintf("%d units at the end", r.Target.Units)), savingOf(best, r))
			case "target " + t.String() + standbySuffix:
				fmt.Printf("| %s, with standby | | | %s | %s |\n", t,
					variant(r, t, share, fmt.Sprintf("%d running units at the end, %d resumes", r.Target.Units, r.Resumes)), savingOf(best, r))
			}
		}
	}
}

// variant is a target run's cell: its cost, share within the wait, and
// whether it met the target, with more said in the parentheses.
func variant(r *run, t target, share float64, more string) string {
	met := "missed"
	if r.Within[t.wait.String()] >= share {
		met = "met"
	}
	return fmt.Sprintf("%.2f, %.1f%% (%s; %s)", r.Cost, 100*r.Within[t.wait.String()], met, more)
}

// savingOf is what r saves against the cheapest fixed setting best ("-"
// without either).
func savingOf(best, r *run) string {
	if best == nil || r == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(best.Cost-r.Cost)/best.Cost)
}

// reportStandby prints, with -standby, per target the cheapest fixed
// standby count (no running units) that meets it beside the target with
// standby.
func reportStandby(runs []run) {
	if !withStandby {
		return
	}
	fmt.Printf("\n| target | cheapest fixed standby count meeting it | target with standby | saving |\n|---|---|---|---|\n")
	for _, t := range targets {
		share := float64(t.percent) / 100
		var best, driven *run
		for i := range runs {
			r := &runs[i]
			switch {
			case strings.HasPrefix(r.Policy, "standby ") && r.Within[t.wait.String()] >= share && (best == nil || r.Cost < best.Cost):
				best = r
			case r.Policy == "target "+t.String()+standbySuffix:
				driven = r
			}
		}
		cell := "none of the sweep"
		if best != nil {
			cell = fmt.Sprintf("%s: %.2f, %.1f%%", best.Policy, best.Cost, 100*best.Within[t.wait.String()])
		}
		d := "-"
		if driven != nil {
			d = fmt.Sprintf("%.2f, %.1f%%", driven.Cost, 100*driven.Within[t.wait.String()])
		}
		fmt.Printf("| %s | %s | %s | %s |\n", t, cell, d, savingOf(best, driven))
	}
}
