package headroom

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// TargetInput is what the demand history says of a Headroom with a
// target, for Resolve.
type TargetInput struct {
	demand.Estimate
	// Window is the launch time the demand is counted in.
	Window time.Duration
	// Burst, for a Headroom that may keep standby units (spec.standby),
	// is the estimate over windows of BurstWindow: the part of a burst
	// that arrives before a resumed standby node is Ready less the wait,
	// which running units must hold. Nil when no such window is needed
	// (a resume is within the wait) or standby is not allowed.
	Burst       *demand.Estimate
	BurstWindow time.Duration
	// BurstKnown says the learner worked BurstWindow out (it measured or
	// assumed the resume time); until then every unit runs.
	BurstKnown bool
	// LargestPod is the most units one arriving pod needed in the last
	// day: such a pod needs that many units on one node, which units
	// spread over several nodes do not give it.
	LargestPod int64
	// Shapes are the estimates of the shapes learned apart, the pods
	// larger than a unit (spec.target.shapes Learned), the smaller first.
	Shapes []demand.ShapeEstimate
}

// Reaction is how long berth takes from a pod's arrival to the resume of
// a standby node for it: the scheduler's attempt, the provisioner's batch
// and its plan.
const Reaction = 5 * time.Second

// BurstWindow is the part of a burst running units must hold when
// standby units may take the rest: pods arriving in the first
// resume + Reaction - wait of a burst would wait longer than wait for a
// resumed node. Zero when a resume is within the wait.
func BurstWindow(resume, wait time.Duration) time.Duration {
	return max(resume+Reaction-wait, 0)
}

// BurstWindowRounded is BurstWindow rounded up to 5 s, so that a
// measured resume time that moves by a little does not start the burst
// history again.
func BurstWindowRounded(resume, wait time.Duration) time.Duration {
	const grain = 5 * time.Second
	d := BurstWindow(resume, wait)
	return (d + grain - 1) / grain * grain
}

// ResumeWindow is how long a standby node of the scope's groups takes to
// be Ready once resumed: the median, over Ready nodes that were resumed
// (berth.dev/resumed-at), of the resume to the Ready condition's last
// change, the longest of the groups; without such a node, a KWOK
// group's resume delay, else a third of launch.
func ResumeWindow(groups []*v1alpha1.NodeGroup, nodes []*corev1.Node, launch time.Duration) (d time.Duration, measured bool) {
	longest := slowestBoot(groups, nodes, func(n *corev1.Node) (time.Time, bool) {
		at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationResumedAt])
		return at, err == nil
	})
	if longest > 0 {
		return longest, true
	}
	for _, g := range groups {
		if k := g.Spec.Provider.KWOK; k != nil {
			longest = max(longest, k.ResumeAfter())
		}
	}
	if longest > 0 {
		return longest, false
	}
	return launch / 3, false
}

// slowestBoot is, over the groups, the longest median boot of their Ready
// nodes: from the time from gives (a node it gives none for is left out)
// to the Ready condition's last change; 0 when no node counts.
func slowestBoot(groups []*v1alpha1.NodeGroup, nodes []*corev1.Node, from func(*corev1.Node) (time.Time, bool)) time.Duration {
	in := map[string]bool{}
	for _, g := range groups {
		in[g.Name] = true
	}
	per := map[string][]time.Duration{}
	for _, n := range nodes {
		g := n.Labels[v1alpha1.LabelNodeGroup]
		if !in[g] || !nodeutil.Ready(n) {
			continue
		}
		start, ok := from(n)
		if !ok {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
				if d := c.LastTransitionTime.Sub(start); d > 0 && d < 24*time.Hour {
					per[g] = append(per[g], d)
				}
			}
		}
	}
	longest := time.Duration(0)
	for _, ds := range per {
		longest = max(longest, median(ds))
	}
	return longest
}

// FollowBurstWindow is the burst window a learner keeps counting in: the
// one it has while nothing was measured (the resumed nodes that were
// timed are gone), or while the new one is within 5 s of it (a measured
// resume time moves by a second or two from burst to burst); else want.
// A changed window starts the history again, so it changes rarely.
func FollowBurstWindow(have, want time.Duration, measured bool) time.Duration {
	const grain = 5 * time.Second
	if have > 0 && (!measured || (want-have).Abs() <= grain) {
		return have
	}
	return want
}

// TargetResult is how Resolve sized a Headroom for its target.
type TargetResult struct {
	Phase string
	// Units the history asks for (before the bounds); Message why.
	Units   int32
	Message string
	// CostPerHour of the desired units at the cheapest price per unit in
	// scope (0 when no offering holds a unit).
	CostPerHour float64
}

// DefaultLaunchWindow is the launch time assumed for a scope where no
// node's boot was seen.
const DefaultLaunchWindow = 60 * time.Second

// LaunchWindow is the launch time of the scope's groups: the median, over
// their nodes that berth launched and are Ready, of creation to the Ready
// condition's last change (a node whose Ready flapped later counts long;
// the median keeps one such from moving it), the longest of the groups;
// measured is true then. Without such a node: a KWOK group's launch
// delay, else DefaultLaunchWindow (a learner keeps the window it learned
// in rather than this guess: a group scaled to zero has no node to time).
func LaunchWindow(groups []*v1alpha1.NodeGroup, nodes []*corev1.Node) (d time.Duration, measured bool) {
	longest := slowestBoot(groups, nodes, func(n *corev1.Node) (time.Time, bool) {
		// A resumed node was Ready again at its resume, not its launch.
		return n.CreationTimestamp.Time, n.Annotations[v1alpha1.AnnotationLaunchedBy] != "" && n.Annotations[v1alpha1.AnnotationResumedAt] == ""
	})
	if longest > 0 {
		return longest, true
	}
	for _, g := range groups {
		if k := g.Spec.Provider.KWOK; k != nil && k.LaunchDelay != nil && k.LaunchDelay.Duration > 0 {
			longest = max(longest, k.LaunchDelay.Duration)
		}
	}
	if longest > 0 {
		return longest, false
	}
	return DefaultLaunchWindow, false
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := 1; i < len(s); i++ { // insertion sort: a few dozen nodes a group
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

// UnitPrices are the cheapest price per hour of one unit of the shape in
// the groups (an offering's price over the units its instance type holds
// beside the DaemonSet pods that run on its nodes) and the stopped price
// per unit of the same offering (what a unit on a suspended standby node
// of it costs); 0 when no instance type holds one.
func UnitPrices(groups []*v1alpha1.NodeGroup, shape corev1.ResourceList, dss []daemonset.Pod) (running, stopped float64) {
	c, ok := CheapestPerUnit(groups, shape, dss, nil, nil)
	if !ok {
		return 0, 0
	}
	return c.Price / float64(c.PerNode), c.Stopped / float64(c.PerNode)
}

// resolveTarget replaces the fallback count (manual, automatic, schedule)
// with the target's once the history knows; floor is an active
// schedule's count (0 without one).
func resolveTarget(h *v1alpha1.Headroom, in Inputs, res *Resolved, floor int32) {
	t := h.Spec.Target
	est, ok := in.Targets[h.Name]
	window := est.Window
	if !ok || window <= 0 {
		window, _ = LaunchWindow(GroupsOrAll(res.Groups, in.NodeGroups), in.Nodes)
	}
	price, stopped := UnitPrices(GroupsOrAll(res.Groups, in.NodeGroups), res.Shape.Resources, in.DaemonSets)
	out := &TargetResult{}
	res.Target = out
	defer func() { out.CostPerHour += price*float64(res.Count) + stopped*float64(res.Standby) }()
	shape := describeShape(res.Shape.Resources)
	if t.Wait.Duration >= window {
		// Nothing waits longer than a launch for a node berth launches at
		// once: the goal needs no units.
		out.Phase = v1alpha1.TargetSized
		out.Message = fmt.Sprintf("a wait of %s is as long as a node launch (%s): no units needed for the target", t.Wait.Duration, window.Round(time.Second))
		res.Count, res.Standby = bound(t, max(0, floor), res), 0
		return
	}
	if !ok || !est.Known {
		why := "no history yet"
		if ok {
			why = est.Why
		}
		out.Phase = v1alpha1.TargetLearning
		out.Message = fmt.Sprintf("%s; keeping the %d units of spec.units and automatic until then", why, res.Count)
		return
	}
	want := int32(min(est.Units, int64(MaxUnits)))
	out.Units = want
	out.Phase = v1alpha1.TargetSized
	where := "the hour " + hourName(est.Hour)
	if est.Weekly {
		where = "the whole history (the hour " + hourName(est.Hour) + " has too few windows of its own)"
	}
	n := max(want, floor)
	res.Count = bound(t, n, res)
	out.Message = fmt.Sprintf("%d %% of the demand in %s windows of %s fits in %s of %s: keeping %d",
		percent(t), window.Round(time.Second), where, unitCount(int64(want)), shape, res.Count)
	if floor > want {
		out.Message += fmt.Sprintf(" (schedule %s asks for %d)", res.ActiveSchedule, floor)
	}
	capped := res.Count < n
	if h.Spec.Standby != nil {
		splitStandby(t, est, res, floor, out)
	}
	if capped {
		out.Phase = v1alpha1.TargetCapped
		out.Message += " (capped by " + res.cappedBy + ")"
	}
	if t.LearnsShapes() {
		resolveShapes(t, est.Shapes, res, out)
	}
	if est.LargestPod > 1 && len(res.Learned) == 0 {
		// Without learned units (shapes Unit, or none kept yet), say
		// that units spread over nodes may not hold such a pod.
		out.Message += fmt.Sprintf("; a pod that arrived in the last day needs %d units on one node, which units spread over nodes may not give it (a Headroom of its shape would)",
			est.LargestPod)
	}
}

// resolveShapes lays the running units out in the learned shapes. The
// unit's history counts every pod (a pod larger than a unit as the units
// it needs), so Count running units of the Headroom's shape hold the
// target's share of all the demand together; a learned shape's history
// says how many units of its shape (one pod each) hold the share of its
// pods' demand, and those must be whole, on one node. So each learned
// shape that knows its need keeps that many units of its shape, each in
// the place of the units of the Headroom's shape its pod was counted as,
// as many as the running units hold (the smaller shapes first): the room
// is the running units' (what the history says the goal needs), in
// pieces a large pod fits in. With standby units, the pods past the
// running part land on resumed standby nodes, whose room is whole. Only
// shapes an offering in scope holds are kept, and maxCostPerHour, at
// each shape's own price, may cut them.
func resolveShapes(t *v1alpha1.HeadroomTarget, shapes []demand.ShapeEstimate, res *Resolved, out *TargetResult) {
	groups := GroupsOrAll(res.Groups, res.all)
	unit := demand.ShapeOf(res.Shape.Resources)
	unitPrice, stopped := UnitPrices(groups, res.Shape.Resources, res.dss)
	limit, haveLimit := costLimit(t)
	left := int64(res.Count) // running units not yet taken by a learned shape
	cost := unitPrice*float64(res.Count) + stopped*float64(res.Standby)
	for _, se := range shapes {
		list := se.Shape.List()
		name := describeShape(list)
		if !se.Known {
			out.Message += fmt.Sprintf("; pods of %s: %s", name, se.Why)
			continue
		}
		c, ok := CheapestPerUnit(groups, list, res.dss, nil, nil)
		if !ok {
			out.Message += fmt.Sprintf("; pods of %s: no offering in scope holds one, keeping none", name)
			continue
		}
		price := c.Price / float64(c.PerNode)
		size := max(unit.Units(map[corev1.ResourceName]int64(se.Shape)), 1)
		want := min(se.Units, int64(MaxUnits))
		room := min(want, left/size)
		n := room
		for n > 0 && haveLimit && cost+float64(n)*(price-unitPrice*float64(size)) > limit+1e-9 {
			n--
		}
		msg := fmt.Sprintf("; %d %% of the demand of pods of %s fits in %s of that shape: keeping %d", percent(t), name, unitCount(want), n)
		if room < want {
			msg += fmt.Sprintf(" (each in the place of %d running units of %s, %d left)", size, describeShape(res.Shape.Resources), left)
		}
		if n < room {
			out.Phase = v1alpha1.TargetCapped
			msg += fmt.Sprintf(" (capped by maxCostPerHour %s at %.4f a unit of that shape)", t.MaxCostPerHour, price)
		}
		out.Message += msg
		if n <= 0 {
			continue
		}
		left -= n * size
		cost += float64(n) * (price - unitPrice*float64(size))
		out.CostPerHour += price * float64(n)
		res.Learned = append(res.Learned, v1alpha1.LearnedUnits{Resources: list, Count: int32(n)})
	}
	if len(res.Learned) > 0 {
		res.Count = int32(left)
		out.Message += fmt.Sprintf("; %d running units of %s beside them", left, describeShape(res.Shape.Resources))
	}
}

// splitStandby keeps on standby nodes the units that only the part of a
// burst after a resume needs: running units hold the demand of the burst
// window (the part that cannot wait for a resume), standby units the
// rest of the launch window's. A standby unit costs its node's stopped
// price, a tenth or so of a running one, and a resumed node runs as a
// launched one would, so this is the cheapest mix that meets the target.
// Without the burst window's estimate every unit stays running.
func splitStandby(t *v1alpha1.HeadroomTarget, est TargetInput, res *Resolved, floor int32, out *TargetResult) {
	total := res.Count
	running := total
	switch {
	case !est.BurstKnown:
		out.Message += "; all running until the resume time of the standby nodes is known"
	case est.BurstWindow <= 0:
		running = bound(t, floor, res)
		out.Message = fmt.Sprintf("%s; a resumed standby node is Ready within the wait, so %d of them are standby", out.Message, max(total-running, 0))
	case est.Burst != nil && est.Burst.Known:
		running = bound(t, max(int32(min(est.Burst.Units, int64(MaxUnits))), floor), res)
		out.Message = fmt.Sprintf("%s; the first %s of a burst fits in %d: %d running, %d standby",
			out.Message, est.BurstWindow.Round(time.Second), est.Burst.Units, min(running, total), max(total-running, 0))
	default:
		out.Message += "; all running until the history of the first " + est.BurstWindow.Round(time.Second).String() + " of bursts is known"
	}
	running = min(running, total)
	res.Count, res.Standby = running, total-running
}

// bound applies minUnits, maxUnits and maxCostPerHour.
func bound(t *v1alpha1.HeadroomTarget, n int32, res *Resolved) int32 {
	if t.MinUnits != nil {
		n = max(n, *t.MinUnits)
	}
	if t.MaxUnits != nil && n > *t.MaxUnits {
		n, res.cappedBy = *t.MaxUnits, fmt.Sprintf("maxUnits %d", *t.MaxUnits)
	}
	if limit, ok := costLimit(t); ok {
		price, _ := UnitPrices(GroupsOrAll(res.Groups, res.all), res.Shape.Resources, res.dss)
		if price > 0 {
			// In float64 before any conversion: a budget of more units than
			// an int32 holds caps nothing (a conversion would wrap).
			if most := math.Floor(limit/price + 1e-9); float64(n) > most {
				n, res.cappedBy = int32(max(most, 0)), fmt.Sprintf("maxCostPerHour %s at %.4f a unit", t.MaxCostPerHour, price)
			}
		}
	}
	return min(n, MaxUnits)
}

// costLimit is spec.target.maxCostPerHour as a number; false when unset
// (the API's pattern admits only decimals).
func costLimit(t *v1alpha1.HeadroomTarget) (float64, bool) {
	if t.MaxCostPerHour == "" {
		return 0, false
	}
	v, err := strconv.ParseFloat(t.MaxCostPerHour, 64)
	return v, err == nil
}

func percent(t *v1alpha1.HeadroomTarget) int32 {
	if t.Percent == 0 {
		return 95
	}
	return t.Percent
}

// TargetShape is the unit a target counts demand in: spec.units' shape,
// else automatic.unit's; nil without one (the CEL rules require one).
func TargetShape(h *v1alpha1.Headroom) corev1.ResourceList {
	if u := h.Spec.Units; u != nil && len(u.Resources) > 0 {
		return u.Resources
	}
	if a := h.Spec.Automatic; a != nil && a.Unit != nil {
		return a.Unit.Resources
	}
	return nil
}

// Share is the target's share of pods, 0-1.
func Share(t *v1alpha1.HeadroomTarget) float64 { return float64(percent(t)) / 100 }

// GroupsOrAll is a scope's groups: all of them for the whole cluster
// (nil scope).
func GroupsOrAll(scope, all []*v1alpha1.NodeGroup) []*v1alpha1.NodeGroup {
	if scope == nil {
		return all
	}
	return scope
}

var days = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

func hourName(h int) string { return fmt.Sprintf("%s %02d:00", days[(h/24)%7], h%24) }

func describeShape(rl corev1.ResourceList) string {
	var parts []string
	if q, ok := rl[corev1.ResourceCPU]; ok {
		parts = append(parts, q.String()+" cpu")
	}
	if q, ok := rl[corev1.ResourceMemory]; ok {
		parts = append(parts, q.String())
	}
	for name, q := range rl {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			parts = append(parts, q.String()+" "+string(name))
		}
	}
	return strings.Join(parts, ", ")
}

// Status renders a target result for the Headroom's status.
func (t *TargetResult) Status(window time.Duration) *v1alpha1.HeadroomTargetStatus {
	if t == nil {
		return nil
	}
	return &v1alpha1.HeadroomTargetStatus{Phase: t.Phase, Units: t.Units, Message: t.Message,
		Window: &metav1.Duration{Duration: window}, CostPerHour: strconv.FormatFloat(t.CostPerHour, 'f', 4, 64)}
}

// unitCount says n units in words: "1 unit", "3 units".
func unitCount(n int64) string {
	if n == 1 {
		return "1 unit"
	}
	return fmt.Sprintf("%d units", n)
}
