package sim

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	hr "github.com/berth-dev/berth/internal/headroom"
)

// metrics collects what a simulation reports, in memory bounded by the
// cluster's size, not the trace's length: waits go to a sketch of
// logarithmic buckets (2 % relative error), the time series is sampled.
type metrics struct {
	name  string
	start time.Time
	// cost accrues at rate (the price per hour of the live nodes) between
	// changes; hours by instance and capacity type the same way.
	last  time.Time
	rate  float64
	cost  float64
	byKey map[[2]string]*typeHours
	// headroom's share of the cost, accrued between samples.
	headroomRate, headroomCost float64
	waitAll, waitNeeded        sketch
	pods, needed, launchWaits  int
	// deleted are the pods deleted while they waited (deletedUnbound).
	deleted                     int
	recreated, running          int
	nodesAtStart                int
	launches, launchesHeadroom  int
	resumes                     int
	removals, drains, evictions int
	replacements, preemptions   int
	scaleDownPlans              int
	series                      []Sample
	lastLaunch                  time.Time
}

type typeHours struct {
	live  int
	hours float64
}

func newMetrics(name string, start time.Time) *metrics {
	return &metrics{name: name, start: start, last: start, byKey: map[[2]string]*typeHours{}}
}

func (m *metrics) accrue(now time.Time) {
	h := now.Sub(m.last).Hours()
	if h <= 0 {
		return
	}
	m.cost += m.rate * h
	m.headroomCost += m.headroomRate * h
	for _, t := range m.byKey {
		t.hours += float64(t.live) * h
	}
	m.last = now
}

func (m *metrics) typeOf(n *node) *typeHours {
	k := [2]string{n.instance, n.capacity}
	if m.byKey[k] == nil {
		m.byKey[k] = &typeHours{}
	}
	return m.byKey[k]
}

func (m *metrics) launched(n *node, _ string, headroomOnly bool) {
	m.accrue(n.launchedAt)
	m.rate += n.price
	m.typeOf(n).live++
	if n.atStart {
		m.nodesAtStart++
		return
	}
	m.launches++
	if headroomOnly {
		m.launchesHeadroom++
	}
	m.lastLaunch = n.launchedAt
}

// repriced moves a node from one price to another (suspended, resumed).
func (m *metrics) repriced(_ *node, now time.Time, from, to float64) {
	m.accrue(now)
	m.rate += to - from
}

func (m *metrics) removed(n *node, now time.Time) {
	m.accrue(now)
	m.rate -= n.rate()
	m.typeOf(n).live--
	m.removals++
}

func (m *metrics) created(p *pod) {
	switch {
	case p.placeholder != "":
	case p.running:
		m.running++
	case p.recreated:
		m.recreated++
	default:
		m.pods++
	}
}

func (m *metrics) bound(p *pod, now time.Time) {
	if p.placeholder != "" || p.running {
		return
	}
	w := now.Sub(p.created).Seconds()
	m.waitAll.add(w)
	if p.needed {
		m.needed++
		m.waitNeeded.add(w)
		if !m.lastLaunch.Before(p.created) {
			m.launchWaits++ // a node was launched while it waited
		}
	}
}

// deletedUnbound counts a pod of the trace deleted while it waited: it
// waited until then (a pod that never got a node is the worst wait, not
// none).
func (m *metrics) deletedUnbound(p *pod, now time.Time) {
	if p.placeholder != "" || p.running {
		return
	}
	w := now.Sub(p.created)
	m.deleted++
	m.waitAll.add(w.Seconds())
	if p.needed { // it waited for capacity, as bound counts it
		m.waitNeeded.add(w.Seconds())
	}
}

// sample records the time series and the rate of headroom's cost: the
// price share of the room its ready units take on their nodes.
func (m *metrics) sample(now time.Time, e *Engine) {
	m.accrue(now)
	s := Sample{At: now.Sub(m.start).Seconds(), CostPerHour: m.rate}
	m.headroomRate = 0
	// In the nodes' order: a sum of prices in map order differs in its
	// last digits from run to run.
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		s.Nodes++
		if !n.ready {
			s.Launching++
		}
		if n.standbyFor != "" {
			s.Standby++
			m.headroomRate += n.rate() // the standby tier is headroom
			continue
		}
		cpu := n.obj.Status.Allocatable.Cpu().AsApproximateFloat64()
		if cpu <= 0 {
			continue
		}
		held := 0.0
		for _, p := range e.podsOn(n.obj.Name) {
			if p.placeholder != "" {
				held += p.obj.Spec.Containers[0].Resources.Requests.Cpu().AsApproximateFloat64()
			}
		}
		held += e.headroom.onNode[n.obj.Name]
		m.headroomRate += n.price * min(held/cpu, 1)
	}
	for _, p := range e.pending {
		if p.placeholder == "" {
			s.Pending++
		}
	}
	for name := range e.headroom.desired {
		s.HeadroomDesired += int(e.headroom.desired[name])
		s.HeadroomReady += int(e.headroom.ready[name])
	}
	m.series = append(m.series, s)
}

func (m *metrics) result(end time.Time, e *Engine) *Result {
	m.accrue(end)
	r := &Result{Policy: m.name, Seconds: end.Sub(m.start).Seconds(), Cost: m.cost, HeadroomCost: m.headroomCost,
		Pods: m.pods, DeletedUnbound: m.deleted, RunningAtStart: m.running, NodesAtStart: m.nodesAtStart, Recreated: m.recreated, PodsWaited: m.needed, PodsWaitedForLaunch: m.launchWaits,
		Launches: m.launches, LaunchesForHeadroom: m.launchesHeadroom, Removals: m.removals, Drains: m.drains,
		Evictions: m.evictions, Replacements: m.replacements, Preemptions: m.preemptions, Series: m.series, Resumes: m.resumes}
	for _, p := range e.pending {
		if p.placeholder == "" {
			r.Unbound++
			m.waitNeeded.add(end.Sub(p.created).Seconds())
			m.waitAll.add(end.Sub(p.created).Seconds())
			e.learner.judgeUnbound(p, end.Sub(p.created))
		}
	}
	if h := r.Seconds / 3600; h > 0 {
		r.CostPerHour = r.Cost / h
	}
	if r.Cost > 0 {
		r.HeadroomShare = r.HeadroomCost / r.Cost
	}
	r.Wait, r.WaitAll = m.waitNeeded.stats(), m.waitAll.stats()
	r.WaitCDF = m.waitNeeded.cdf()
	r.WaitAllCDF = m.waitAll.cdf()
	r.Histories = e.learner.histories()
	r.BurstHistories = e.learner.burstHistories()
	r.Shapes = e.learner.shapes()
	for _, h := range e.cfg.Headrooms {
		if t := h.Spec.Target; t != nil {
			share := hr.Share(t)
			r.Target = &TargetResult{Headroom: h.Name, Wait: t.Wait.Seconds(), Percent: int32(math.Round(share * 100)),
				Within: r.Within(t.Wait.Seconds()), Phase: e.headroom.phase[h.Name], Units: e.headroom.desired[h.Name]}
			// The pods the target is about: its scope and pod selector.
			if x := e.learner.byName[h.Name]; x != nil && x.judged > 0 {
				r.Target.Within = float64(x.within) / float64(x.judged)
			}
			r.Target.Met = r.Target.Within >= share
			break
		}
	}
	for k, t := range m.byKey {
		r.NodeHours = append(r.NodeHours, TypeHours{InstanceType: k[0], CapacityType: k[1], Hours: t.hours})
	}
	slices.SortFunc(r.NodeHours, func(a, b TypeHours) int {
		return cmp.Or(cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.CapacityType, b.CapacityType))
	})
	return r
}

// sketch counts values in logarithmic buckets from 0.1 s up (factor 1.02),
// with zeros apart: quantiles within 2 %, in bounded memory.
type sketch struct {
	zeros   int
	buckets []int
	n       int
	max     float64
}

const (
	sketchMin    = 0.1
	sketchFactor = 1.02
)

func (s *sketch) add(v float64) {
	s.n++
	s.max = max(s.max, v)
	if v < sketchMin {
		s.zeros++
		return
	}
	i := int(math.Log(v/sketchMin) / math.Log(sketchFactor))
	for len(s.buckets) <= i {
		s.buckets = append(s.buckets, 0)
	}
	s.buckets[i]++
}

// quantile returns the q-quantile (0-1): the upper bound of its bucket.
func (s *sketch) quantile(q float64) float64 {
	if s.n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(s.n)))
	if rank <= s.zeros {
		return 0
	}
	seen := s.zeros
	for i, c := range s.buckets {
		seen += c
		if seen >= rank {
			return min(sketchMin*math.Pow(sketchFactor, float64(i+1)), s.max)
		}
	}
	return s.max
}

func (s *sketch) stats() WaitStats {
	return WaitStats{Count: s.n, P50: s.quantile(0.5), P95: s.quantile(0.95), P99: s.quantile(0.99), Max: s.max}
}

// cdf is the distribution at each bucket's upper bound.
func (s *sketch) cdf() []Point {
	if s.n == 0 {
		return nil
	}
	out := []Point{{Seconds: 0, Fraction: float64(s.zeros) / float64(s.n)}}
	seen := s.zeros
	for i, c := range s.buckets {
		if c == 0 {
			continue
		}
		seen += c
		out = append(out, Point{Seconds: sketchMin * math.Pow(sketchFactor, float64(i+1)), Fraction: float64(seen) / float64(s.n)})
	}
	return out
}
