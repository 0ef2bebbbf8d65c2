package sim

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/tracetest"
	"github.com/berth-dev/berth/internal/trace"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// traceOf writes events into a trace and opens it for reading.
func traceOf(t *testing.T, events ...*trace.Event) *trace.Reader {
	t.Helper()
	return tracetest.Reader(t, trace.Header{Start: t0}, events...)
}

func create(at float64, name, cpu string) *trace.Event {
	return &trace.Event{At: at, Op: trace.OpCreate, Pod: &trace.Pod{Namespace: "shop", Name: name, Workload: "shop/web",
		Labels: map[string]string{"app": "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}
}

func del(at float64, name string) *trace.Event {
	return &trace.Event{At: at, Op: trace.OpDelete, Namespace: "shop", Name: name}
}

func end(at float64) *trace.Event { return &trace.Event{At: at, Op: trace.OpEnd} }

// m4 is one group of 4-cpu nodes at 0.40 an hour that boot in 60 s.
func m4() *v1alpha1.NodeGroup {
	return b.NodeGroup("g", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.40")),
		b.LaunchDelay(metav1.Duration{Duration: time.Minute}))
}

func units(count int32, cpu string, placeholders bool) *v1alpha1.Headroom {
	return &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "spare"}, Spec: v1alpha1.HeadroomSpec{
		Scope:        v1alpha1.HeadroomScope{NodeGroups: []string{"g"}},
		Placeholders: placeholders,
		Units: &v1alpha1.HeadroomUnits{Count: count, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
}

// burst is four pods of 1 cpu at t=300 in a trace that ends at t=900.
func burst() []*trace.Event {
	return []*trace.Event{create(300, "a", "1"), create(300, "b", "1"), create(300, "c", "1"), create(300, "d", "1"), end(900)}
}

// hourly resync keeps provisioning rounds to the ones pods and nodes ask for.
func cfg(name string, hrs ...*v1alpha1.Headroom) Config {
	return Config{Name: name, NodeGroups: []*v1alpha1.NodeGroup{m4()}, Headrooms: hrs, Resync: time.Hour}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.9f, want %.9f", what, got, want)
	}
}

const price = 0.40 / 3600 // per second

// Without headroom the burst waits for a node: the batch window closes 1 s
// after the pods (t=301), the node boots for 60 s and they bind at t=361.
// The node costs from its launch to the end: 599 s.
func TestBurstWithoutHeadroom(t *testing.T) {
	r, err := Run(cfg("none"), traceOf(t, burst()...))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seconds != 900 || r.Pods != 4 || r.PodsWaited != 4 || r.PodsWaitedForLaunch != 4 || r.Unbound != 0 || r.Launches != 1 {
		t.Fatalf("got seconds %v pods %d waited %d forLaunch %d unbound %d launches %d", r.Seconds, r.Pods, r.PodsWaited, r.PodsWaitedForLaunch, r.Unbound, r.Launches)
	}
	for _, q := range []float64{r.Wait.P50, r.Wait.P99, r.Wait.Max} {
		// the sketch's buckets are 2 % wide; max is exact
		if q < 61 || q > 61*1.02 {
			t.Errorf("wait quantile %v, want 61 s", q)
		}
	}
	near(t, "max wait", r.Wait.Max, 61)
	near(t, "cost", r.Cost, 599*price)
	near(t, "headroom cost", r.HeadroomCost, 0)
}

// With four units of 1 cpu the first node boots at t=0 for the units; the
// burst binds at once into their room (no wait), and a second node is
// launched at t=301 to bring the units back: 900 s + 599 s of nodes.
func TestBurstWithVirtualHeadroom(t *testing.T) {
	r, err := Run(cfg("units", units(4, "1", false)), traceOf(t, burst()...))
	if err != nil {
		t.Fatal(err)
	}
	if r.PodsWaited != 0 || r.Wait.Count != 0 || r.WaitAll.Max != 0 || r.Unbound != 0 {
		t.Errorf("pods waited: %d (%+v, all %+v), unbound %d; want none", r.PodsWaited, r.Wait, r.WaitAll, r.Unbound)
	}
	if r.Launches != 2 || r.LaunchesForHeadroom != 2 || r.Removals != 0 {
		t.Errorf("launches %d (for headroom %d), removals %d; want 2 (2), 0", r.Launches, r.LaunchesForHeadroom, r.Removals)
	}
	near(t, "cost", r.Cost, 900*price+599*price)
	// The units held the first node from its readiness sample (t=120, the
	// first sample after the round at t=65) until the burst took it at
	// t=300 (sample t=300 sees the pods), then the second from t=420.
	if r.HeadroomCost <= 0 || r.HeadroomCost >= r.Cost {
		t.Errorf("headroom cost %v of %v, want a share of it", r.HeadroomCost, r.Cost)
	}
}

// With placeholders the units are pods: the first node boots at t=1 (the
// batch after the placeholders failed at t=0), the burst preempts the four
// placeholders at t=300 and binds at once; the recreated placeholders ask
// for the second node at t=301.
func TestBurstWithPlaceholders(t *testing.T) {
	r, err := Run(cfg("placeholders", units(4, "1", true)), traceOf(t, burst()...))
	if err != nil {
		t.Fatal(err)
	}
	if r.PodsWaited != 0 || r.Preemptions != 4 || r.Launches != 2 {
		t.Errorf("waited %d preemptions %d launches %d, want 0, 4, 2", r.PodsWaited, r.Preemptions, r.Launches)
	}
	near(t, "cost", r.Cost, 899*price+599*price)
}

// Headroom smaller than the burst, on nodes of 2 cpu at 0.20 an hour: the
// node booted at t=0 for the two units takes two pods at once; the other
// two wait. The round at t=301 launches a node for them and one for the
// units; the two pods bind when theirs is Ready at t=361 (61 s).
func TestBurstLargerThanHeadroom(t *testing.T) {
	c := cfg("two", units(2, "1", false))
	c.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("g", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")),
		b.LaunchDelay(metav1.Duration{Duration: time.Minute}))}
	r, err := Run(c, traceOf(t, burst()...))
	if err != nil {
		t.Fatal(err)
	}
	if r.PodsWaited != 2 || r.Wait.Max != 61 || r.WaitAll.Count != 4 || r.WaitAll.P50 != 0 || r.Launches != 3 {
		t.Errorf("waited %d (max %v s), all %+v, launches %d; want 2 pods waiting 61 s of 4, 3 launches", r.PodsWaited, r.Wait.Max, r.WaitAll, r.Launches)
	}
	near(t, "cost", r.Cost, (900+2*599)*0.20/3600)
}

// A trace that begins with running pods begins with their cluster: six
// pods of 1 cpu on two nodes of 4 Ready at 0, with the two units of
// headroom on them; they wait for nothing, and the demand a target
// learns is the later pods'. At 300 s a pod of 1 cpu binds at once into
// the units' room and one of 3 cpu waits for a launch (61 s).
func TestPodsRunningAtTheStartAreTheCluster(t *testing.T) {
	var ev []*trace.Event
	for i := range 6 {
		c := create(0, "run-"+strconv.Itoa(i), "1")
		c.Running = true
		ev = append(ev, c)
	}
	ev = append(ev, create(300, "small", "1"), create(300, "large", "3"), end(900))
	h := units(2, "1", false)
	h.Spec.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}
	r, err := Run(cfg("warm", h), traceOf(t, ev...))
	if err != nil {
		t.Fatal(err)
	}
	if r.RunningAtStart != 6 || r.NodesAtStart != 2 || r.Pods != 2 || r.PodsWaited != 1 || r.Launches != 1 || r.Unbound != 0 {
		t.Fatalf("running at start %d on %d nodes, pods %d, waited %d, launches %d, unbound %d; want 6 on 2, 2, 1, 1, 0",
			r.RunningAtStart, r.NodesAtStart, r.Pods, r.PodsWaited, r.Launches, r.Unbound)
	}
	near(t, "max wait", r.Wait.Max, 61)
	near(t, "cost", r.Cost, (2*900+599)*price)
	hist, most := r.Histories["spare"], int64(0)
	for _, hour := range hist.Hours {
		for _, bin := range hour.Bins {
			most = max(most, bin.Units)
		}
	}
	if hist.Seen == 0 || most != 4 {
		t.Errorf("the target learned windows of up to %d units (%d windows), want 4: the two pods of 300 s, not the running ones", most, hist.Seen)
	}
}

// Placeholders of the headroom are part of the cluster a trace begins
// with, as virtual units are; a running pod no node group can hold waits
// as any pod, from the start.
func TestWarmStartPlacesPlaceholdersAndCountsWhatItCannotHold(t *testing.T) {
	var ev []*trace.Event
	for i, cpu := range []string{"1", "1", "1", "1", "1", "1", "1", "1", "64"} {
		c := create(0, "run-"+strconv.Itoa(i), cpu)
		c.Running = true
		ev = append(ev, c)
	}
	ev = append(ev, end(120))
	r, err := Run(cfg("warm", units(2, "1", true)), traceOf(t, ev...))
	if err != nil {
		t.Fatal(err)
	}
	if r.NodesAtStart != 3 || r.Launches != 0 || len(r.Series) == 0 || r.Series[0].HeadroomReady != 2 {
		t.Errorf("nodes at start %d, launches %d, series %+v; want 3 nodes holding the pods and both placeholders from 0, no launch",
			r.NodesAtStart, r.Launches, r.Series[:min(len(r.Series), 1)])
	}
	if r.RunningAtStart != 8 || r.Pods != 1 || r.Unbound != 1 || r.PodsWaited != 0 || r.Wait.Max != 120 {
		t.Errorf("running at start %d, pods %d, unbound %d (waited %d, max %v s); want 8, and the 64-cpu pod waiting 120 s unbound",
			r.RunningAtStart, r.Pods, r.Unbound, r.PodsWaited, r.Wait.Max)
	}
}

// The burst leaves at t=500; its node is empty and removable from the
// next scale-down round (t=500, rounds every 10 s), drained once it was
// removable for consolidateAfter (30 s): removed at t=530.
func TestEmptyNodeRemovedAfterConsolidateAfter(t *testing.T) {
	ev := burst()
	ev = append(ev[:4], del(500, "a"), del(500, "b"), del(500, "c"), del(500, "d"), end(900))
	r, err := Run(cfg("none"), traceOf(t, ev...))
	if err != nil {
		t.Fatal(err)
	}
	if r.Launches != 1 || r.Removals != 1 || r.Evictions != 0 {
		t.Errorf("launches %d removals %d evictions %d, want 1, 1, 0", r.Launches, r.Removals, r.Evictions)
	}
	near(t, "cost", r.Cost, (530-301)*price)
}

// Three pods of 1.5 cpu at t=5 need two 4-cpu nodes (launched at t=6,
// Ready and bound at t=66). At t=200 one leaves: each node holds one pod, and either
// pod fits on the other node. The round at t=200 finds a node removable;
// at t=230 (consolidateAfter 30 s) it is drained: its pod is evicted and
// made again by its controller, and binds at once on the other node; the
// round at t=240 removes the empty node. Nodes: 234 s + 894 s.
func TestConsolidationEvictsAndRecreates(t *testing.T) {
	ev := []*trace.Event{create(5, "a", "1500m"), create(5, "b", "1500m"), create(5, "c", "1500m"), del(200, "a"), end(900)}
	var waits []time.Duration
	c := cfg("none")
	c.OnBound = func(_ string, created, bound time.Duration) { waits = append(waits, bound-created) }
	r, err := Run(c, traceOf(t, ev...))
	if err != nil {
		t.Fatal(err)
	}
	if r.Launches != 2 || r.Drains != 1 || r.Evictions != 1 || r.Recreated != 1 || r.Removals != 1 || r.Pods != 3 {
		t.Errorf("launches %d drains %d evictions %d recreated %d removals %d pods %d; want 2 1 1 1 1 3",
			r.Launches, r.Drains, r.Evictions, r.Recreated, r.Removals, r.Pods)
	}
	want := []time.Duration{61 * time.Second, 61 * time.Second, 61 * time.Second, 0}
	if len(waits) != 4 || waits[0] != want[0] || waits[1] != want[1] || waits[2] != want[2] || waits[3] != 0 {
		t.Errorf("waits %v, want %v", waits, want)
	}
	near(t, "cost", r.Cost, (234+894)*price)
}

// A pod no node of the group can hold (8 cpu, nodes of 4) launches
// nothing and is reported unbound, its wait counted to the end.
func TestUnplaceablePodLaunchesNothing(t *testing.T) {
	r, err := Run(cfg("none"), traceOf(t, create(100, "huge", "8"), end(400)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Launches != 0 || r.Unbound != 1 || r.Wait.Max != 300 || r.Cost != 0 {
		t.Errorf("launches %d unbound %d max wait %v cost %v; want 0, 1, 300 s, 0", r.Launches, r.Unbound, r.Wait.Max, r.Cost)
	}
}

// The simulated scale-down starts at most as many drains a round as the
// controller does by default.
func TestRemovalsPerRoundAsTheController(t *testing.T) {
	if maxRemovalsPerRound != disruption.DefaultMaxRemovalsPerRound {
		t.Errorf("simulator %d, controller %d", maxRemovalsPerRound, disruption.DefaultMaxRemovalsPerRound)
	}
}

// A Headroom with a target (95 % of pods within 5 s) and no units to
// start with: four pods of 1 cpu arrive every 10 minutes and run 5. For
// the first hour berth learns (the fallback: 0 units) and each burst
// waits for a node (61 s); then the history holds six bursts of 4 units
// in 60 s windows, the target keeps 4 units, and every later burst starts
// at once.
func TestTargetLearnsTheBurst(t *testing.T) {
	var ev []*trace.Event
	for b := range 18 {
		at := float64(b*600 + 30)
		for i := range 4 {
			name := "p" + strconv.Itoa(b) + "-" + strconv.Itoa(i)
			ev = append(ev, create(at, name, "1"), del(at+300, name))
		}
	}
	slices.SortStableFunc(ev, func(a, b *trace.Event) int { return cmp.Compare(a.At, b.At) })
	ev = append(ev, end(3*3600))
	h := units(0, "1", false)
	h.Spec.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}
	waits := map[int]time.Duration{} // by burst, the longest
	c := cfg("target", h)
	c.OnBound = func(key string, created, bound time.Duration) {
		b := int(created / (600 * time.Second))
		waits[b] = max(waits[b], bound-created)
	}
	r, err := Run(c, traceOf(t, ev...))
	if err != nil {
		t.Fatal(err)
	}
	for b := range 18 {
		switch {
		case b < 6 && waits[b] != 61*time.Second:
			t.Errorf("burst %d (learning) waited %s, want a launch (61 s)", b, waits[b])
		case b >= 7 && waits[b] != 0:
			t.Errorf("burst %d waited %s, want none: the target keeps 4 units", b, waits[b])
		}
	}
	hist := r.Histories["spare"]
	if hist == nil || hist.Bursts < 12 || hist.Window != time.Minute {
		t.Fatalf("history %+v", hist)
	}
	if share := r.Within(5); share < 0.6 {
		t.Errorf("%.2f of pods within 5 s", share)
	}
	// Learned elsewhere: a run that starts with this history keeps the 4
	// units from the start (their node, launched at 0, is Ready at 60 s:
	// the first burst, at 30 s, waits 30 s) and no burst waits for a
	// launch.
	c.Histories = r.Histories
	clear(waits)
	if _, err := Run(c, traceOf(t, ev...)); err != nil {
		t.Fatal(err)
	}
	for b := range 18 {
		if want := map[bool]time.Duration{true: 30 * time.Second}[b == 0]; waits[b] != want {
			t.Errorf("with a learned history, burst %d waited %s, want %s", b, waits[b], want)
		}
	}
}

// TestRunsOfOneTraceAgree: a policy simulated twice on the same trace
// gives the same day, to the last eviction: the engine keeps pods in a
// map, and a round that read them in the map's order (different from run
// to run) planned scale-up and scale-down on pods listed differently,
// so that two runs of `berth simulate` disagreed (ci family: 2,087 to
// 2,109 pods waited over three runs).
func TestRunsOfOneTraceAgree(t *testing.T) {
	hdr, events, err := trace.Generate(trace.Params{Family: trace.FamilyCI, Seed: 1, Duration: 8 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ng := b.NodeGroup("g", b.InstanceType("m-4", "4", "16Gi", b.Spot("zone-a", "0.12"), b.OnDemand("zone-a", "0.40")),
		b.InstanceType("m-8", "8", "32Gi", b.Spot("zone-a", "0.24"), b.OnDemand("zone-a", "0.80")),
		b.LaunchDelay(metav1.Duration{Duration: 90 * time.Second}))
	run := func() *Result {
		r := tracetest.Reader(t, hdr, events...)
		res, err := Run(Config{Name: "none", NodeGroups: []*v1alpha1.NodeGroup{ng}, Resync: 10 * time.Second}, r)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := run()
	if first.Evictions == 0 {
		t.Fatalf("the day evicted no pod (%+v): the test would not compare rounds that move pods", first)
	}
	for range 3 {
		if diff := gocmp.Diff(first, run()); diff != "" {
			t.Fatalf("a second run differs (-first +again):\n%s", diff)
		}
	}
}

// TestARunStopsWhenItsContextEnds: a simulation of a user who pressed
// Ctrl-C returns the context's error instead of running to the end.
func TestARunStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunContext(ctx, cfg("stopped"), traceOf(t, burst()...)); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunContext after the context ended: %v, want context.Canceled", err)
	}
	if _, err := Run(cfg("whole"), traceOf(t, burst()...)); err != nil {
		t.Fatal(err)
	}
}

// A pod that may not run where the placeholders are (its node selector
// names another group) preempts none of them: kube-scheduler preempts
// only on a node where the pod then passes every filter. Before, the
// placeholders were deleted, came back and were deleted again at the
// same instant, for ever (the run never ended and took gigabytes).
func TestAPodThatCannotUseTheRoomPreemptsNothing(t *testing.T) {
	c := cfg("placeholders", units(4, "1", true))
	c.NodeGroups = append(c.NodeGroups, b.NodeGroup("gpu", b.InstanceType("g-4", "4", "16Gi", b.OnDemand("zone-a", "1.00")),
		b.LaunchDelay(metav1.Duration{Duration: time.Minute})))
	gpu := create(300, "trainer", "3")
	gpu.Pod.Spec.NodeSelector = map[string]string{v1alpha1.LabelNodeGroup: "gpu"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := RunContext(ctx, c, traceOf(t, gpu, end(900)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Preemptions != 0 || r.Unbound != 0 || r.PodsWaitedForLaunch != 1 {
		t.Errorf("preemptions %d, unbound %d, waited for a launch %d; want 0, 0, 1 (a gpu node launched for the pod)", r.Preemptions, r.Unbound, r.PodsWaitedForLaunch)
	}
}

// Two Headrooms of different units (500m and 3 cpu): each unit's room is
// priced at its own Headroom's cpu, and runs of one trace agree to the
// last digit. Before, every unit was priced at the cpu of whichever
// Headroom a map gave first, and the share moved from run to run.
func TestTheCostOfTwoHeadroomsIsEachUnitsOwn(t *testing.T) {
	small, large := units(4, "500m", false), units(1, "3", false)
	large.Name = "large"
	var costs []float64
	for range 6 {
		c := cfg("two", small, large)
		c.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("g", b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.80")),
			b.LaunchDelay(metav1.Duration{Duration: time.Minute}))}
		r, err := Run(c, traceOf(t, end(3600)))
		if err != nil {
			t.Fatal(err)
		}
		costs = append(costs, r.HeadroomCost)
	}
	for _, got := range costs[1:] {
		if got != costs[0] {
			t.Fatalf("headroom cost of six runs %v, want one figure", costs)
		}
	}
	// One m-8 holds both (2 + 3 of 8 cpu) from the first sample on:
	// 5/8 of its price, nearly the whole hour.
	if share := costs[0] / (0.80 * 5 / 8); share < 0.9 || share > 1 {
		t.Errorf("headroom cost %v, want about 5/8 of the node's hour (%v)", costs[0], 0.80*5/8)
	}
}

// Pods deleted while they waited count in the waits, to their deletion:
// a group of one 4-cpu node holds four of ten 1-cpu pods; the other six
// wait until they are deleted at t=300 (290 s). Before, they were in no
// figure: the report said 4 pods waited, none unbound, 61 s at most.
func TestPodsDeletedWhileTheyWaitCountInTheWaits(t *testing.T) {
	c := cfg("one")
	c.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("g", b.Size(0, 1), b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.40")),
		b.LaunchDelay(metav1.Duration{Duration: time.Minute}))}
	var events []*trace.Event
	for i := range 10 {
		events = append(events, create(10, "p"+strconv.Itoa(i), "1"))
	}
	for i := range 10 {
		events = append(events, del(300, "p"+strconv.Itoa(i)))
	}
	r, err := Run(c, traceOf(t, append(events, end(600))...))
	if err != nil {
		t.Fatal(err)
	}
	if r.DeletedUnbound != 6 || r.Unbound != 0 {
		t.Errorf("deleted unbound %d, unbound at end %d; want 6 and 0", r.DeletedUnbound, r.Unbound)
	}
	near(t, "max wait", r.Wait.Max, 290)
}

// A target is judged on the pods it is about: its pod selector picks the
// web pods, which bind at once into the headroom's node; batch pods
// (5 cpu: no node of the group holds one; they wait to the end) are not the
// target's. Before, the report judged the target over every pod and said
// it was missed.
func TestATargetIsJudgedOnItsOwnPods(t *testing.T) {
	h := units(4, "1", false)
	h.Spec.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95, MinUnits: ptr.To[int32](4),
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	var ev []*trace.Event
	for i := range 3 {
		ev = append(ev, create(float64(300+i), "web-"+strconv.Itoa(i), "1"))
		batch := create(float64(300+i), "batch-"+strconv.Itoa(i), "5")
		batch.Pod.Labels = map[string]string{"app": "batch"}
		ev = append(ev, batch)
	}
	r, err := Run(cfg("target", h), traceOf(t, append(ev, end(900))...))
	if err != nil {
		t.Fatal(err)
	}
	if r.Target == nil || r.Target.Within != 1 || !r.Target.Met {
		t.Fatalf("target %+v, want every web pod within 5 s, met", r.Target)
	}
	if all := r.Within(5); all >= 0.95 {
		t.Errorf("%.2f of all pods within 5 s: the batch pods should have waited", all)
	}
}

// A target scoped to a group is not judged on a pod no group of its
// scope could take (its node selector names another group): that pod
// never gets a node, but it is not the target's.
func TestATargetIsNotJudgedOnPodsOutsideItsScope(t *testing.T) {
	h := units(4, "1", false)
	h.Spec.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95, MinUnits: ptr.To[int32](4)}
	c := cfg("scoped", h)
	c.NodeGroups = append(c.NodeGroups, b.NodeGroup("other", b.Size(0, 0), b.InstanceType("o-4", "4", "16Gi", b.OnDemand("zone-a", "0.40"))))
	var ev []*trace.Event
	for i := range 3 {
		ev = append(ev, create(float64(300+i), "web-"+strconv.Itoa(i), "1"))
	}
	elsewhere := create(303, "elsewhere", "1")
	elsewhere.Pod.Spec.NodeSelector = map[string]string{v1alpha1.LabelNodeGroup: "other"}
	r, err := Run(c, traceOf(t, append(append(ev, elsewhere), end(900))...))
	if err != nil {
		t.Fatal(err)
	}
	if r.Unbound != 1 {
		t.Fatalf("unbound %d, want the pod of the other group", r.Unbound)
	}
	if r.Target == nil || r.Target.Within != 1 {
		t.Errorf("target %+v, want every pod of its scope within 5 s", r.Target)
	}
}
