package demand

import (
	"math"
	"time"
)

// WaitEdges are the upper bounds (seconds) of the wait histogram's bins;
// a last bin holds the longer waits.
var WaitEdges = []float64{0.5, 1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// waitSlot is the waits of one slot of time.
type waitSlot struct {
	index  int64 // slot number since 1970, to tell a stale slot
	pods   int64
	within int64
	bins   [17]int64 // len(WaitEdges)+1
}

// Waits keeps the measured waits for capacity of a day, in 144 slots of
// ten minutes: bounded whatever the number of pods.
type Waits struct {
	slots [144]waitSlot
}

// slotLength is the span of a slot.
const slotLength = 10 * time.Minute

func slotOf(t time.Time) int64 { return t.UnixNano() / int64(slotLength) }

// Observe records a pod that got capacity at at after waiting wait;
// within says whether that met the target.
func (w *Waits) Observe(at time.Time, wait time.Duration, within bool) {
	i := slotOf(at)
	s := &w.slots[i%int64(len(w.slots))]
	if s.index != i {
		*s = waitSlot{index: i}
	}
	s.pods++
	if within {
		s.within++
	}
	sec := wait.Seconds()
	b := len(WaitEdges)
	for k, e := range WaitEdges {
		if sec <= e {
			b = k
			break
		}
	}
	s.bins[b]++
}

// Measured is the waits over a period.
type Measured struct {
	Pods, Within int64
	// Quantile is the upper bound of the bin holding the share's
	// quantile (seconds); +Inf past the last bin; 0 without pods.
	Quantile float64
}

// Over sums the slots of the period before now and finds the wait at
// share (0-1).
func (w *Waits) Over(now time.Time, period time.Duration, share float64) Measured {
	last := slotOf(now)
	first := slotOf(now.Add(-period)) + 1
	var m Measured
	var bins [17]int64
	for i := max(first, last-int64(len(w.slots))+1); i <= last; i++ {
		s := &w.slots[i%int64(len(w.slots))]
		if s.index != i {
			continue
		}
		m.Pods += s.pods
		m.Within += s.within
		for k, c := range s.bins {
			bins[k] += c
		}
	}
	if m.Pods == 0 {
		return m
	}
	rank := int64(share*float64(m.Pods) + 0.999999)
	seen := int64(0)
	for k, c := range bins {
		seen += c
		if seen >= rank {
			if k < len(WaitEdges) {
				m.Quantile = WaitEdges[k]
			} else {
				m.Quantile = math.Inf(1)
			}
			return m
		}
	}
	m.Quantile = math.Inf(1)
	return m
}

// correctMinPods is how many measured pods the correction needs before it
// trusts the measured share.
const correctMinPods = 50

// correctGain is how many points the history is asked per point the
// pods fell short: a point more of the windows' demand is held only in
// the windows larger than the units (the tail), so it brings the pods
// less than a point (on the simulated ci days about half of one).
const correctGain = 2

// maxShare bounds the corrected share: the last pods of a distribution
// are its longest tail, which no finite headroom is sure to cover.
const maxShare = 0.999

// Corrected is the share the history is asked to cover so that the
// measured share meets share. The history counts net demand in launch
// windows; the waits it does not see (units still being replaced after a
// burst took them, pods recreated by an eviction, bursts straddling two
// windows) make the measured share fall short of the modelled one. Every
// point the last day's pods fell short of share (with at least
// correctMinPods of them) is asked of the history correctGain times on
// top; measured at or above share, the share stands (the estimate does
// not drift down on its own success).
func Corrected(share float64, m Measured) float64 {
	if m.Pods < correctMinPods || share <= 0 {
		return share
	}
	short := share - float64(m.Within)/float64(m.Pods)
	if short <= 0 {
		return share
	}
	return math.Min(share+correctGain*short, maxShare)
}
