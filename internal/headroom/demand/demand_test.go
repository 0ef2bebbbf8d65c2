package demand

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var cpu1 = ShapeOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")})

// monday is 2026-01-05 00:00 UTC, a Monday.
var monday = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func TestHourOfWeek(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int
	}{
		{monday, 0}, {monday.Add(9*time.Hour + 30*time.Minute), 9}, {monday.Add(6*24*time.Hour + 23*time.Hour), 167},
		{monday.Add(7 * 24 * time.Hour), 0}, {time.Date(2026, 1, 7, 12, 0, 0, 0, time.FixedZone("X", 3600)), 2*24 + 11},
	} {
		if got := HourOfWeek(tc.t); got != tc.want {
			t.Errorf("HourOfWeek(%s) = %d, want %d", tc.t, got, tc.want)
		}
	}
}

// Ten windows of 4 units and ten of 8: 120 units of demand. H units cover
// 20H for H <= 4 and 40 + 10H up to 8.
func TestNeedCoversTheShareOfDemand(t *testing.T) {
	bins := []Bin{{Units: 8, Weight: 10}, {Units: 4, Weight: 10}}
	for _, tc := range []struct {
		share float64
		want  int64
	}{
		{0, 0}, {0.5, 3}, {0.6, 4}, {2.0 / 3, 4}, {0.7, 5}, {0.8, 6}, {0.95, 8}, {1, 8},
	} {
		if got := need(bins, tc.share); got != tc.want {
			t.Errorf("need(%.3f) = %d, want %d", tc.share, got, tc.want)
		}
	}
	if got := need(nil, 0.95); got != 0 {
		t.Errorf("no demand needs %d units", got)
	}
}

func TestUnitsOfAShape(t *testing.T) {
	req := RequestsOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2500m"), corev1.ResourceMemory: resource.MustParse("5Gi")})
	if got := cpu1.Units(req); got != 5 { // memory needs 5, cpu 3
		t.Errorf("units %d, want 5", got)
	}
	if got := cpu1.Units(RequestsOf(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})); got != 0 {
		t.Errorf("a resource the shape lacks counts %d units", got)
	}
}

// history fills each hour of a week with windows: bursts of `peak` units
// in the windows of Monday 09:00, of 1 unit in every other window
// elsewhere (30 bursts an hour: each hour answers for itself).
func history(t *testing.T, peak int64) *History {
	t.Helper()
	h := NewHistory(time.Minute, cpu1, 0, monday)
	for m := range 7 * 24 * 60 {
		at := monday.Add(time.Duration(m) * time.Minute)
		switch {
		case HourOfWeek(at) == 9:
			h.Add(at, peak)
		case m%2 == 0:
			h.Add(at, 1)
		default:
			h.Add(at, 0)
		}
	}
	return h
}

// Units grow an hour ahead of the peak the history knows and shrink
// after it.
func TestEstimateFollowsTheWeek(t *testing.T) {
	h := history(t, 10)
	week := monday.Add(7 * 24 * time.Hour)
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{7 * time.Hour, 1}, {8*time.Hour + 30*time.Minute, 10}, {9 * time.Hour, 10}, {10 * time.Hour, 1}, {30 * time.Hour, 1},
	} {
		e := h.Estimate(week.Add(tc.at), 0.95)
		if !e.Known || e.Units != tc.want || e.Weekly {
			t.Errorf("at Monday+%s: %+v, want %d units from the hour's own windows", tc.at, e, tc.want)
		}
	}
}

func TestEstimateLearningFirst(t *testing.T) {
	h := NewHistory(time.Minute, cpu1, 0, monday)
	if e := h.Estimate(monday.Add(30*time.Minute), 0.95); e.Known || !strings.Contains(e.Why, "learning: watched 30m0s of at least 1h0m0s") {
		t.Errorf("after 30 min: %+v", e)
	}
	for m := range 120 {
		h.Add(monday.Add(time.Duration(m)*time.Minute), 0)
	}
	h.Add(monday.Add(2*time.Hour), 5)
	if e := h.Estimate(monday.Add(2*time.Hour), 0.95); e.Known || !strings.Contains(e.Why, "1 bursts seen") {
		t.Errorf("one burst: %+v", e)
	}
	h.Add(monday.Add(2*time.Hour+time.Minute), 5)
	h.Add(monday.Add(2*time.Hour+2*time.Minute), 5)
	// Hour 2 has only 3 bursts of its own: the week's histogram answers.
	if e := h.Estimate(monday.Add(2*time.Hour+5*time.Minute), 0.95); !e.Known || e.Units != 5 || !e.Weekly {
		t.Errorf("three bursts of 5: %+v", e)
	}
	var nilHistory *History
	if e := nilHistory.Estimate(monday, 0.9); e.Known {
		t.Errorf("nil history: %+v", e)
	}
}

// Old windows fade: a week later a burst counts half.
func TestHistoryDecays(t *testing.T) {
	h := NewHistory(time.Minute, cpu1, 14*24*time.Hour, monday) // half-life 7 days
	h.Add(monday, 8)
	h.Add(monday.Add(7*24*time.Hour), 2)
	bins := h.Hours[0].Bins
	if len(bins) != 2 || bins[0].Units != 2 || bins[0].Weight != 1 || bins[1].Units != 8 || bins[1].Weight < 0.499 || bins[1].Weight > 0.501 {
		t.Errorf("bins %+v, want 2 units weight 1 and 8 units weight 0.5", bins)
	}
}

// Above 64 units demands share buckets 5 % wide; the answer is at most
// 5 % above the exact one.
func TestLargeDemandsAreBucketed(t *testing.T) {
	h := NewHistory(time.Minute, cpu1, 0, monday)
	for _, u := range []int64{1000, 1001, 1020, 1040} {
		h.Add(monday, u)
	}
	if n := len(h.Hours[0].Bins); n > 2 {
		t.Errorf("%d bins for demands within 5 %%", n)
	}
	if got := need(h.Hours[0].Bins, 1); got < 1040 || got > 1092 {
		t.Errorf("need %d for a largest demand of 1040", got)
	}
}

// The recorder: pods count in the step (half a window) of their arrival,
// departures in that of their leaving; each closed step adds the net
// demand of the window ending with it (itself and the step before), never
// below zero; steps are closed a grace after they end, the empty ones
// too; a late or unwatched event is dropped. Worked out by hand: window 1
// min, steps of 30 s, grace 3 min.
func TestRecorderCutsWindows(t *testing.T) {
	h := NewHistory(time.Minute, cpu1, 0, monday)
	r := NewRecorder(h, monday) // watches from step 1 (00:00:30)
	one := RequestsOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	at := func(s int) time.Time { return monday.Add(time.Duration(s) * time.Second) }
	r.Arrived(at(20), at(25), one)  // step 0: before the watch, dropped
	r.Arrived(at(40), at(100), one) // step 1: 2 arrive
	r.Arrived(at(45), at(100), one)
	r.Arrived(at(65), at(150), one)  // step 2: 1, bound late; with step 1 a burst of 3 in a minute
	r.Arrived(at(130), at(135), one) // step 4: 2 arrive, 2 leave: 0
	r.Arrived(at(131), at(135), one)
	r.Left(at(140), at(140), one)
	r.Left(at(141), at(141), one)
	r.Left(at(200), at(200), one) // step 6: -1, counts 0
	if n := r.Close(at(100)); n != 0 {
		t.Errorf("closed %d steps at 100 s: none has ended its grace", n)
	}
	// At 359 s steps 1 to 4 (the last ends at 150 s, 150+180 <= 359)
	// are closed, step 5 (ends 180 s) is not: windows 2, 3, 1 and 0.
	if n := r.Close(at(359)); n != 4 {
		t.Errorf("closed %d steps at 359 s, want 4", n)
	}
	r.Arrived(at(50), at(370), one) // step 1 is closed: dropped
	if n := r.Close(at(600)); n != 9 {
		t.Errorf("closed %d steps at 600 s, want steps 5 to 13", n)
	}
	bins := h.Hours[0].Bins
	want := []int64{1, 2, 3}
	ok := h.Seen == 13 && h.Bursts == 3 && len(bins) == len(want)
	for i := 0; ok && i < len(bins); i++ {
		ok = bins[i].Units == want[i] && bins[i].Weight > 0.99 && bins[i].Weight <= 1
	}
	if !ok {
		t.Errorf("history seen %d bursts %d bins %+v; want 13 steps, windows of 1, 2 and 3 units once each", h.Seen, h.Bursts, bins)
	}
}

// A history survives a restart as JSON: the same estimate; the recorder
// of the new process does not count the time it was down.
func TestHistoryRoundTrip(t *testing.T) {
	h := history(t, 6)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 64<<10 {
		t.Errorf("a week of history is %d bytes", len(b))
	}
	back := &History{}
	if err := json.Unmarshal(b, back); err != nil {
		t.Fatal(err)
	}
	if err := back.Check(); err != nil {
		t.Fatal(err)
	}
	at := monday.Add(7*24*time.Hour + 8*time.Hour + 30*time.Minute)
	if a, b := h.Estimate(at, 0.9), back.Estimate(at, 0.9); a != b || a.Units != 6 {
		t.Errorf("estimate before %+v, after %+v", a, b)
	}
	seen := back.Seen
	r := NewRecorder(back, at.Add(24*time.Hour)) // down for a day
	r.Close(at.Add(24*time.Hour + 10*time.Minute))
	if added := back.Seen - seen; added > 20 { // 10 minutes of 30 s steps
		t.Errorf("a restart after a day down added %d steps", added)
	}
	if !back.Matches(70*time.Second, cpu1) || back.Matches(2*time.Minute, cpu1) || back.Matches(time.Minute, ShapeOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})) {
		t.Error("Matches: a window within 20 % and the same shape only")
	}
	for _, bad := range []string{`{"version":2}`, `{"version":1,"window":60000000000,"halfLife":1,"shape":{}}`,
		`{"version":1,"window":60000000000,"halfLife":1,"shape":{"cpu":1000},"hours":[{"bins":[{"u":-1,"w":1}]}]}`} {
		h := &History{}
		if err := json.Unmarshal([]byte(bad), h); err == nil {
			if err := h.Check(); err == nil {
				t.Errorf("Check accepted %s", bad)
			}
		}
	}
}

// Waits: the share within the target and the quantile's bin over the
// last hour and day; slots older than a day are forgotten.
func TestWaits(t *testing.T) {
	var w Waits
	now := monday.Add(36 * time.Hour)
	for i := range 90 { // last hour: 90 pods at once, 10 waited 21 s
		w.Observe(now.Add(-time.Duration(i)*30*time.Second), 0, true)
	}
	for i := range 10 {
		w.Observe(now.Add(-time.Duration(i)*time.Minute), 21*time.Second, false)
	}
	for i := range 100 { // 3 hours ago: 100 pods waited 61 s
		w.Observe(now.Add(-3*time.Hour-time.Duration(i)*time.Second), 61*time.Second, false)
	}
	w.Observe(now.Add(-25*time.Hour), 0, true) // older than a day
	hour := w.Over(now, time.Hour, 0.95)
	if hour.Pods != 100 || hour.Within != 90 || hour.Quantile != 30 {
		t.Errorf("last hour %+v, want 100 pods, 90 within, p95 in the 20-30 s bin", hour)
	}
	if p50 := w.Over(now, time.Hour, 0.5); p50.Quantile != 0.5 {
		t.Errorf("last hour p50 %+v, want the first bin", p50)
	}
	day := w.Over(now, 24*time.Hour, 0.95)
	if day.Pods != 200 || day.Within != 90 || day.Quantile != 90 {
		t.Errorf("last day %+v, want 200 pods, 90 within, p95 in the 60-90 s bin", day)
	}
	if none := w.Over(now.Add(48*time.Hour), time.Hour, 0.95); none.Pods != 0 || none.Quantile != 0 {
		t.Errorf("two days later %+v", none)
	}
}

// Corrected asks the history for the points the measured waits fell
// short by, once enough pods were measured, and never less than the goal.
func TestCorrected(t *testing.T) {
	for _, c := range []struct {
		m    Measured
		want float64
	}{
		{Measured{Pods: 49, Within: 0}, 0.95},    // too few pods
		{Measured{Pods: 100, Within: 97}, 0.95},  // met: stands
		{Measured{Pods: 100, Within: 94}, 0.97},  // 1 point short: asked twice
		{Measured{Pods: 100, Within: 92}, 0.999}, // 3 points short, bounded
		{Measured{Pods: 100, Within: 10}, 0.999}, // bounded
	} {
		if got := Corrected(0.95, c.m); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Corrected(0.95, %+v) = %v, want %v", c.m, got, c.want)
		}
	}
}

// A pod whose request is near the largest quantity (any user may create
// one; the kubelet fails it, and it leaves) does not wrap a window's sum:
// its departure with a 2-cpu pod's is a demand of no units, not 100,000.
// And the units of a request near the largest are the most a window
// counts, not a wrapped negative.
func TestHugeRequestsDoNotWrapTheDemand(t *testing.T) {
	h := NewHistory(time.Minute, cpu1, 0, monday)
	r := NewRecorder(h, monday)
	at := func(s int) time.Time { return monday.Add(time.Duration(s) * time.Second) }
	huge := Requests{corev1.ResourceCPU: math.MaxInt64}
	two := RequestsOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	r.Left(at(40), at(40), huge)
	r.Left(at(41), at(41), two)
	r.Close(at(600))
	for _, b := range h.Hours[0].Bins {
		if b.Units > 0 {
			t.Errorf("a window of two departures learned %d units", b.Units)
		}
	}
	if got := cpu1.Units(huge); got != maxUnits {
		t.Errorf("units of a request of %d millicores: %d, want the most a window counts (%d)", int64(math.MaxInt64), got, maxUnits)
	}
}

// A pod of a request near the largest quantity that arrives and leaves in
// one window leaves the other pods' demand standing: 3 cpu arrive with
// it, and 3 units are learned, not none.
func TestAHugePodThatComesAndGoesLeavesTheRestOfTheDemand(t *testing.T) {
	h := NewHistory(time.Minute, cpu1, 0, monday)
	r := NewRecorder(h, monday)
	at := func(s int) time.Time { return monday.Add(time.Duration(s) * time.Second) }
	huge := Requests{corev1.ResourceCPU: math.MaxInt64}
	r.Arrived(at(40), at(40), RequestsOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}))
	r.Arrived(at(41), at(41), huge)
	r.Left(at(42), at(42), huge)
	r.Close(at(600))
	var most int64
	for _, b := range h.Hours[0].Bins {
		most = max(most, b.Units)
	}
	if most != 3 {
		t.Errorf("the window learned at most %d units, want the 3 cpu's 3", most)
	}
}
