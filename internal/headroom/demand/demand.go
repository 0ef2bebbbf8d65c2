// Package demand learns how much capacity a workload asks for in bursts
// and works out the headroom a wait-time goal needs.
//
// Time is cut into windows of one node-launch time (launch to Ready,
// measured), a new one every half launch time (they overlap by half, so
// a burst that straddles a boundary is seen whole). A window's demand is what the pods in scope that arrived in
// it request, less what the pods that left in it requested (a rollout
// that replaces pods asks for nothing new), never below zero, counted in
// units of the headroom's shape (the most any resource needs). A pod that
// arrives while headroom is free starts at once; one that arrives after
// the window's demand used it up waits for a node, one launch time. So,
// with H units kept, the share of pods that start at once over a history
// of windows is
//
//	covered(H) = sum over windows of min(demand, H) / sum of demand
//
// and the goal "Percent of pods get capacity within Wait" (Wait shorter
// than a launch) needs the smallest H with covered(H) >= Percent.
//
// The history keeps, per hour of the week, a histogram of window demands
// (exact up to 64 units, then buckets 5 % wide), each window's weight
// halving every half-life, so it has at most 168 x ~150 numbers whatever
// the number of pods or how long berth runs. Units for now take the
// largest of this hour's and the next hour's needs, so headroom grows
// ahead of a peak the history knows; an hour with fewer than 20 bursts of
// its own (a quantile of a few is noise) uses the whole week's.
package demand

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Version of the persisted history.
const Version = 1

// Hours in a week: the buckets of a history.
const Hours = 168

// Defaults and bounds of learning.
const (
	// DefaultHistory is how far back bursts count (their weight halves
	// every half of it).
	DefaultHistory = 7 * 24 * time.Hour
	// MinHistory is how long berth must have watched before it trusts
	// the history (fewer windows: the fallback units are kept).
	MinHistory = time.Hour
	// MinBursts is how many windows with demand the history must hold.
	MinBursts = 3
	// hourMinBursts is the weight of bursts (windows with demand) an hour
	// needs of its own: a quantile of a few bursts is mostly noise, so
	// below it the whole week's histogram answers for the hour.
	hourMinBursts = 20
	// exactUnits are counted one by one; above, buckets 5 % wide.
	exactUnits   = 64
	bucketFactor = 1.05
	// maxUnits bounds a window's demand in units.
	maxUnits = 100_000
)

// Shape is the unit's requests, in milli-units (cpu in millicores,
// memory in bytes x 1000, devices x 1000): what one unit holds.
type Shape map[corev1.ResourceName]int64

// ShapeOf converts a resource list.
func ShapeOf(rl corev1.ResourceList) Shape {
	s := Shape{}
	for name, q := range rl {
		if v := q.MilliValue(); v > 0 {
			s[name] = v
		}
	}
	return s
}

// List converts back to a resource list.
func (s Shape) List() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, v := range s {
		if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
			out[name] = *resource.NewQuantity(v/1000, resource.BinarySI)
		} else {
			out[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// Units is how many units of the shape hold the requests: the most any
// resource of the shape needs, rounded up. Resources the shape does not
// have are not counted.
func (s Shape) Units(req map[corev1.ResourceName]int64) int64 {
	n := int64(0)
	for name, per := range s {
		if per <= 0 {
			continue
		}
		if v := req[name]; v > 0 {
			u := v / per // rounded up without v+per-1, which passes int64 near its largest
			if v%per != 0 {
				u++
			}
			n = max(n, u)
		}
	}
	return min(n, maxUnits)
}

// Bin is a histogram bin: windows whose demand was Units (the bin's
// upper bound above exactUnits), with their total weight.
type Bin struct {
	Units  int64   `json:"u"`
	Weight float64 `json:"w"`
}

// Hour is the histogram of the windows that started in one hour of the
// week.
type Hour struct {
	Bins []Bin `json:"bins,omitempty"`
	// Windows is the weight of all windows, with those without demand.
	Windows float64 `json:"windows,omitempty"`
	// Decayed is when the weights were last halved to now.
	Decayed time.Time `json:"decayed,omitzero"`
}

// History is what berth learned of one Headroom's bursts.
type History struct {
	Version int `json:"version"`
	// Window is the launch time the windows were cut by; Shape the unit
	// they were counted in. A history of another window or shape is
	// started again.
	Window time.Duration `json:"window"`
	Shape  Shape         `json:"shape"`
	// HalfLife of a window's weight.
	HalfLife time.Duration `json:"halfLife"`
	// Since is when learning started; Seen the windows closed; Bursts
	// those with demand.
	Since  time.Time `json:"since"`
	Seen   int64     `json:"seen"`
	Bursts int64     `json:"bursts"`
	// Next is the index (time since 1970 / Step) of the next step to
	// close.
	Next  int64       `json:"next"`
	Hours [Hours]Hour `json:"hours"`
}

// NewHistory starts an empty history.
func NewHistory(window time.Duration, shape Shape, history time.Duration, now time.Time) *History {
	if history <= 0 {
		history = DefaultHistory
	}
	return &History{Version: Version, Window: window, Shape: shape, HalfLife: history / 2, Since: now}
}

// Matches reports whether the history was learned with this window and
// shape (a window within 20 % counts as the same: launch times vary).
func (h *History) Matches(window time.Duration, shape Shape) bool {
	if h == nil || h.Version != Version || len(shape) != len(h.Shape) {
		return false
	}
	for k, v := range shape {
		if h.Shape[k] != v {
			return false
		}
	}
	return math.Abs(float64(window-h.Window)) <= 0.2*float64(h.Window)
}

// Check validates a history read back from storage.
func (h *History) Check() error {
	switch {
	case h.Version != Version:
		return fmt.Errorf("history version %d, want %d", h.Version, Version)
	case h.Window <= 0 || h.HalfLife <= 0:
		return errors.New("history without a window or a half-life")
	case len(h.Shape) == 0:
		return errors.New("history without a unit shape")
	}
	for i := range h.Hours {
		if len(h.Hours[i].Bins) > 4*exactUnits+400 {
			return fmt.Errorf("history hour %d has %d bins: too many", i, len(h.Hours[i].Bins))
		}
		for _, b := range h.Hours[i].Bins {
			if b.Units <= 0 || b.Units > maxUnits || b.Weight < 0 || math.IsNaN(b.Weight) || math.IsInf(b.Weight, 0) {
				return fmt.Errorf("history hour %d: bad bin %+v", i, b)
			}
		}
	}
	return nil
}

// Rebase moves a history learned elsewhere in time (another trace) to
// start watching at now: the time-of-week histograms stay, the time it
// was watched is kept, the next window is now's.
func (h *History) Rebase(now time.Time) {
	watched := time.Unix(0, h.Next*int64(h.Step())).Sub(h.Since)
	h.Since = now.Add(-max(watched, 0))
	h.Next = 0
	for i := range h.Hours {
		h.Hours[i].Decayed = time.Time{}
	}
}

// Step is how often a window closes: half a window (windows overlap by
// half; see Recorder).
func (h *History) Step() time.Duration { return max(h.Window/2, time.Millisecond) }

// HourOfWeek is the bucket of a time: hours since Monday 00:00 UTC.
func HourOfWeek(t time.Time) int {
	t = t.UTC()
	return (int(t.Weekday())+6)%7*24 + t.Hour()
}

// binOf rounds a demand to its bin: exact up to exactUnits, then the
// upper bound of a 5 %-wide bucket.
func binOf(u int64) int64 {
	if u <= exactUnits {
		return u
	}
	k := math.Ceil(math.Log(float64(u)/exactUnits) / math.Log(bucketFactor))
	return min(int64(math.Ceil(exactUnits*math.Pow(bucketFactor, k))), maxUnits)
}

// decay halves the hour's weights for every half-life since it last did.
func (h *History) decay(hr *Hour, now time.Time) {
	if hr.Decayed.IsZero() {
		hr.Decayed = now
		return
	}
	el := now.Sub(hr.Decayed)
	if el <= 0 {
		return
	}
	f := math.Pow(0.5, el.Hours()/h.HalfLife.Hours())
	hr.Windows *= f
	kept := hr.Bins[:0]
	for _, b := range hr.Bins {
		b.Weight *= f
		if b.Weight >= 1e-3 {
			kept = append(kept, b)
		}
	}
	hr.Bins = kept
	hr.Decayed = now
}

// Add records a closed window that started at start with demand units.
func (h *History) Add(start time.Time, units int64) {
	hr := &h.Hours[HourOfWeek(start)]
	h.decay(hr, start)
	hr.Windows++
	h.Seen++
	if units <= 0 {
		return
	}
	h.Bursts++
	u := binOf(units)
	i, found := slices.BinarySearchFunc(hr.Bins, u, func(b Bin, u int64) int { return cmp.Compare(b.Units, u) })
	if found {
		hr.Bins[i].Weight++
		return
	}
	hr.Bins = slices.Insert(hr.Bins, i, Bin{Units: u, Weight: 1})
}

func weight(bins []Bin) float64 {
	w := 0.0
	for _, b := range bins {
		w += b.Weight
	}
	return w
}

// need is the smallest H with covered(H) >= share over the bins.
func need(bins []Bin, share float64) int64 {
	if share <= 0 {
		return 0
	}
	total := 0.0
	for _, b := range bins {
		total += float64(b.Units) * b.Weight
	}
	if total <= 0 {
		return 0
	}
	// covered(H) = (sum_{u<=H} u w + H sum_{u>H} w) / total grows with
	// H; try each bin's value as H (the optimum is one of them, or lies
	// between two, found by solving the line between them).
	sorted := slices.Clone(bins)
	slices.SortFunc(sorted, func(a, b Bin) int { return cmp.Compare(a.Units, b.Units) })
	below, wAbove := 0.0, 0.0
	for _, b := range sorted {
		wAbove += b.Weight
	}
	prev := int64(0)
	for _, b := range sorted {
		// For H in (prev, b.Units]: covered = (below + H*wAbove)/total.
		if wAbove > 0 {
			h := math.Ceil((share*total - below) / wAbove)
			if h <= float64(b.Units) {
				return max(prev+1, int64(math.Max(h, 0)))
			}
		}
		below += float64(b.Units) * b.Weight
		wAbove -= b.Weight
		prev = b.Units
	}
	return prev
}

// Estimate is the units the history says a goal needs now.
type Estimate struct {
	// Units needed; Known false when the history is too short (Why says
	// what it lacks) and the fallback units apply.
	Units int64
	Known bool
	Why   string
	// Hour is the hour of the week that needs the most (this one or the
	// next), Weekly whether the whole week's histogram answered for it.
	Hour   int
	Weekly bool
}

// Estimate works out the units that cover share (0-1) of the demand for
// now and the hour ahead, once the history was watched for MinHistory.
func (h *History) Estimate(now time.Time, share float64) Estimate {
	return h.EstimateAfter(now, share, MinHistory)
}

// EstimateAfter is Estimate with another least watching time (the
// controller's --headroom-target-min-history).
func (h *History) EstimateAfter(now time.Time, share float64, minHistory time.Duration) Estimate {
	switch {
	case h == nil:
		return Estimate{Why: "no history yet"}
	case now.Sub(h.Since) < minHistory:
		return Estimate{Why: fmt.Sprintf("learning: watched %s of at least %s", now.Sub(h.Since).Round(time.Second), minHistory)}
	case h.Bursts < MinBursts:
		return Estimate{Why: fmt.Sprintf("learning: %d bursts seen in %s, need %d", h.Bursts, now.Sub(h.Since).Round(time.Minute), MinBursts)}
	}
	var week []Bin
	merged := map[int64]float64{}
	for i := range h.Hours {
		for _, b := range h.Hours[i].Bins {
			merged[b.Units] += b.Weight
		}
	}
	for u, w := range merged {
		week = append(week, Bin{Units: u, Weight: w})
	}
	best := Estimate{Known: true}
	for _, at := range []time.Time{now, now.Add(time.Hour)} {
		i := HourOfWeek(at)
		bins, weekly := h.Hours[i].Bins, false
		if weight(bins) < hourMinBursts {
			bins, weekly = week, true
		}
		if n := need(bins, share); n > best.Units || (best.Units == 0 && at.Equal(now)) {
			best.Units, best.Hour, best.Weekly = n, i, weekly
		}
	}
	return best
}
