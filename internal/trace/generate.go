package trace

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Families of synthetic traces.
const (
	// FamilyDiurnal is web traffic: a Deployment whose replicas follow a
	// day's sine, changed in HPA steps.
	FamilyDiurnal = "diurnal"
	// FamilyCI is bursty CI: bursts of jobs at random times, more of them
	// in working hours, each job running minutes.
	FamilyCI = "ci"
	// FamilyBatch is batch waves: a wave of pods every hour that runs for
	// a quarter of an hour or so.
	FamilyBatch = "batch"
	// FamilyMix is the three together, in their own namespaces.
	FamilyMix = "mix"
)

// Families lists the synthetic families.
var Families = []string{FamilyDiurnal, FamilyCI, FamilyBatch, FamilyMix}

// Params tune a synthetic trace. Zero values take the defaults.
type Params struct {
	Family   string
	Seed     uint64
	Duration time.Duration // default 24h
	// Scale multiplies every pod count (default 1).
	Scale float64
	Start time.Time // default 2026-01-05T00:00:00Z (a Monday)
}

// Generate returns the events of a synthetic trace, in time order.
//
//   - diurnal: Deployment web/web, 500m cpu and 1Gi per pod; replicas
//     10 + 50*(1 + sin(2*pi*(hour-12)/24))/2 times Scale (10 at 6:00, 60
//     at 18:00), re-evaluated every 60 s and changed only in steps of 10 %
//     of the peak (HPA-like); scale-down deletes the newest pods. The
//     replicas of the start are running when the trace begins.
//   - ci: bursts arrive as a Poisson process, 6 an hour from 8:00 to 18:00
//     and 1 an hour otherwise; a burst is 5 to 40 jobs (times Scale) of 1
//     cpu and 2Gi, each running 2 to 20 minutes (pods of workload ci/runner).
//   - batch: at every full hour a wave of 40 pods (times Scale) of 2 cpu
//     and 4Gi, each running 12 to 25 minutes.
//   - mix: all three, in namespaces web, ci and batch.
func Generate(p Params) (Header, []*Event, error) {
	if p.Duration <= 0 {
		p.Duration = 24 * time.Hour
	}
	if p.Scale <= 0 {
		p.Scale = 1
	}
	if p.Start.IsZero() {
		p.Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	h := Header{Version: Version, Start: p.Start, Source: fmt.Sprintf("berth trace generate --family %s --seed %d --duration %s --scale %g", p.Family, p.Seed, p.Duration, p.Scale)}
	var out []*Event
	switch p.Family {
	case FamilyDiurnal:
		out = diurnal(p, "web")
	case FamilyCI:
		out = ci(p, rng, "ci")
	case FamilyBatch:
		out = batch(p, rng, "batch")
	case FamilyMix:
		out = append(append(diurnal(p, "web"), ci(p, rng, "ci")...), batch(p, rng, "batch")...)
	default:
		return h, nil, fmt.Errorf("unknown family %q, want one of %v", p.Family, Families)
	}
	// Running pods come first (they were there before the trace began).
	slices.SortStableFunc(out, func(a, b *Event) int { return cmp.Or(cmp.Compare(a.At, b.At), compareBool(b.Running, a.Running)) })
	for _, e := range out {
		e.At = math.Round(e.At*1000) / 1000 // milliseconds: shorter lines
	}
	out = append(out, &Event{At: p.Duration.Seconds(), Op: OpEnd})
	return h, out, nil
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func podOf(ns, name, workload, cpu, mem string, priority int32) *Pod {
	return &Pod{Namespace: ns, Name: name, Workload: workload, Labels: map[string]string{"app": workloadName(workload)},
		Spec: corev1.PodSpec{Priority: &priority, Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

func workloadName(w string) string {
	for i := range w {
		if w[i] == '/' {
			return w[i+1:]
		}
	}
	return w
}

func diurnal(p Params, ns string) []*Event {
	var out []*Event
	var live []string
	seq := 0
	peak := 60 * p.Scale
	step := math.Max(1, math.Round(peak/10))
	want := func(t float64) int {
		hours := math.Mod(t/3600+float64(p.Start.Hour()), 24)
		r := (10 + 50*(1+math.Sin(2*math.Pi*(hours-12)/24))/2) * p.Scale
		return int(math.Round(r/step) * step)
	}
	for t := 0.0; t < p.Duration.Seconds(); t += 60 {
		w := want(t)
		for len(live) < w {
			seq++
			name := fmt.Sprintf("web-%d", seq)
			// The replicas of the start were running before it.
			out = append(out, &Event{At: t, Op: OpCreate, Pod: podOf(ns, name, ns+"/web", "500m", "1Gi", 0), Running: t == 0})
			live = append(live, name)
		}
		for len(live) > w {
			name := live[len(live)-1]
			live = live[:len(live)-1]
			out = append(out, &Event{At: t, Op: OpDelete, Namespace: ns, Name: name})
		}
	}
	return out
}

func ci(p Params, rng *rand.Rand, ns string) []*Event {
	var out []*Event
	seq := 0
	for t := 0.0; t < p.Duration.Seconds(); {
		hour := math.Mod(t/3600+float64(p.Start.Hour()), 24)
		rate := 1.0 // bursts an hour
		if hour >= 8 && hour < 18 {
			rate = 6
		}
		t += rng.ExpFloat64() / rate * 3600
		if t >= p.Duration.Seconds() {
			break
		}
		jobs := int(math.Round(float64(5+rng.IntN(36)) * p.Scale))
		for range max(jobs, 1) {
			seq++
			name := fmt.Sprintf("job-%d", seq)
			run := 120 + rng.Float64()*1080
			out = append(out, &Event{At: t, Op: OpCreate, Pod: podOf(ns, name, ns+"/runner", "1", "2Gi", 0)},
				&Event{At: t + run, Op: OpDelete, Namespace: ns, Name: name})
		}
	}
	return trim(out, p.Duration)
}

func batch(p Params, rng *rand.Rand, ns string) []*Event {
	var out []*Event
	seq := 0
	first := math.Ceil(float64(p.Start.Minute()*60+p.Start.Second())/3600)*3600 - float64(p.Start.Minute()*60+p.Start.Second())
	for t := first; t < p.Duration.Seconds(); t += 3600 {
		n := int(math.Max(1, math.Round(40*p.Scale)))
		for range n {
			seq++
			name := fmt.Sprintf("wave-%d", seq)
			run := 720 + rng.Float64()*780
			out = append(out, &Event{At: t, Op: OpCreate, Pod: podOf(ns, name, ns+"/wave", "2", "4Gi", 0)},
				&Event{At: t + run, Op: OpDelete, Namespace: ns, Name: name})
		}
	}
	return trim(out, p.Duration)
}

// trim drops events past the end; pods still running then stay.
func trim(events []*Event, d time.Duration) []*Event {
	return slices.DeleteFunc(events, func(e *Event) bool { return e.At >= d.Seconds() })
}
