// Package headroom turns Headroom and CapacityBuffer objects into units:
// how many, of which shape, allowed where. It is pure (values in, values
// out): the headroom controller writes the result into status, and the
// provisioner adds the missing units to its plans as virtual pods.
package headroom

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// Inputs is the cluster a headroom is resolved against.
type Inputs struct {
	Now        time.Time
	NodeGroups []*v1alpha1.NodeGroup
	Nodes      []*corev1.Node
	// Pods bound to nodes (running workload, for automatic headroom:
	// read only when ReadsPods says so).
	Pods []*corev1.Pod
	// Targets are the demand estimates of the Headrooms with a target, by
	// name (none: the target is learning).
	Targets map[string]TargetInput
	// DaemonSets are the cluster's DaemonSets: a target prices a unit by
	// the units an offering's node holds beside the DaemonSet pods that
	// run on it (CheapestPerUnit).
	DaemonSets []daemonset.Pod
}

// Resolved is a headroom in units.
type Resolved struct {
	// Count of units.
	Count int32
	// Shape of one unit.
	Shape v1alpha1.UnitShape
	// Groups are the node groups in scope; nil means the whole cluster.
	Groups []*v1alpha1.NodeGroup
	// ActiveSchedule names the schedule in effect, if any.
	ActiveSchedule string
	// Capped is set when the units asked for were more than MaxUnits:
	// Count is MaxUnits then, and Wanted what was asked for.
	Capped bool
	Wanted float64
	// Problems are parts of the spec that are ignored, e.g. a schedule
	// that never fires; the headroom works without them.
	Problems []string
	// Target is how spec.target sized the count (nil without a target).
	Target *TargetResult
	// Standby is how many units to keep on suspended standby nodes:
	// spec.standby.count, or the target's share of the units when the
	// target knows and spec.standby is set.
	Standby int32
	// Learned are units of the shapes learned from the pods larger than
	// a unit (spec.target.shapes Learned), beside Count units of Shape.
	Learned  []v1alpha1.LearnedUnits
	cappedBy string
	all      []*v1alpha1.NodeGroup
	dss      []daemonset.Pod
}

// Total is the count of units of every shape: Count and the learned
// shapes' (at most MaxUnits).
func (r Resolved) Total() int32 {
	n := int64(max(r.Count, 0))
	for _, l := range r.Learned {
		n += int64(max(l.Count, 0))
	}
	return int32(min(n, int64(MaxUnits)))
}

// GroupNames returns the names of the groups in scope.
func (r Resolved) GroupNames() []string {
	out := make([]string, 0, len(r.Groups))
	for _, g := range r.Groups {
		out = append(out, g.Name)
	}
	return out
}

// Resolve computes a headroom's units. One shape is used for all units: the
// active schedule's, else spec.units', else automatic.unit, else the most
// common request shape of the workload in scope.
func Resolve(h *v1alpha1.Headroom, in Inputs) (Resolved, error) {
	sp := &h.Spec
	if err := negativeQuantities(sp); err != nil {
		return Resolved{}, err
	}
	groups, err := ScopeGroups(h, in.NodeGroups)
	if err != nil {
		return Resolved{}, err
	}
	res := Resolved{Groups: groups}
	manual, haveManual := int32(0), false
	if sp.Units != nil {
		manual, haveManual = sp.Units.Count, true
		res.Shape = sp.Units.UnitShape
	}
	for _, w := range sp.Schedules {
		active, err := ScheduleActive(w.Cron, w.Duration.Duration, in.Now)
		if errors.Is(err, ErrNeverFires) {
			res.Problems = append(res.Problems, fmt.Sprintf("spec.schedules[%s].cron: %v; the schedule is never active", w.Name, err))
			continue
		}
		if err != nil {
			return Resolved{}, fmt.Errorf("spec.schedules[%s].cron: %w", w.Name, err)
		}
		if active {
			manual, haveManual, res.ActiveSchedule = w.Units.Count, true, w.Name
			if len(w.Units.Resources) > 0 {
				res.Shape = w.Units.UnitShape
			}
			break
		}
	}
	if haveManual && len(res.Shape.Resources) == 0 && sp.Automatic == nil {
		return Resolved{}, errors.New("spec.units.resources: no unit shape (set spec.units.resources or the schedule's resources)")
	}
	res.Count, res.Capped = clampUnits(float64(manual))
	res.Wanted = float64(manual)
	if sp.Automatic != nil {
		total, shapes := workload(in, groups)
		if len(res.Shape.Resources) == 0 {
			if sp.Automatic.Unit != nil && len(sp.Automatic.Unit.Resources) > 0 {
				res.Shape = *sp.Automatic.Unit
			} else if common := mostCommon(shapes, statusShape(h)); common != nil {
				res.Shape = v1alpha1.UnitShape{Resources: common}
			}
		}
		auto := unitsFor(total, sp.Automatic.Percentage, res.Shape.Resources)
		res.Wanted = float64(manual) + auto
		if sp.Combine == v1alpha1.CombineMax {
			res.Wanted = max(float64(manual), auto)
		}
		res.Count, res.Capped = clampUnits(res.Wanted)
	}
	if sp.Standby != nil {
		res.Standby = min(max(sp.Standby.Count, 0), MaxUnits)
	}
	if sp.Target != nil {
		if len(res.Shape.Resources) == 0 {
			return Resolved{}, errors.New("spec.target: no unit shape (set spec.units.resources or spec.automatic.unit)")
		}
		res.all, res.dss = in.NodeGroups, in.DaemonSets
		floor := int32(0)
		if res.ActiveSchedule != "" {
			floor = manual
		}
		resolveTarget(h, in, &res, floor)
	}
	return res, nil
}

// ScopeGroups returns the node groups a headroom's scope selects; nil for
// the whole cluster. A named group that does not exist is an error.
func ScopeGroups(h *v1alpha1.Headroom, groups []*v1alpha1.NodeGroup) ([]*v1alpha1.NodeGroup, error) {
	return scopeGroups(h, groups, true)
}

// ScopeGroupsLeft is ScopeGroups without the named groups that no longer
// exist: where a headroom whose spec does not resolve any more (a named
// group deleted) keeps the units of its last valid spec, as its status
// says. An error when none is left.
func ScopeGroupsLeft(h *v1alpha1.Headroom, groups []*v1alpha1.NodeGroup) ([]*v1alpha1.NodeGroup, error) {
	return scopeGroups(h, groups, false)
}

func scopeGroups(h *v1alpha1.Headroom, groups []*v1alpha1.NodeGroup, strict bool) ([]*v1alpha1.NodeGroup, error) {
	sc := &h.Spec.Scope
	if len(sc.NodeGroups) == 0 && sc.NodeGroupSelector == nil {
		return nil, nil
	}
	var sel labels.Selector
	if sc.NodeGroupSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(sc.NodeGroupSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.scope.nodeGroupSelector: %w", err)
		}
		sel = s
	}
	var out []*v1alpha1.NodeGroup
	for _, g := range groups {
		if slices.Contains(sc.NodeGroups, g.Name) || (sel != nil && sel.Matches(labels.Set(g.Labels))) {
			out = append(out, g)
		}
	}
	for _, name := range sc.NodeGroups {
		if strict && !slices.ContainsFunc(out, func(g *v1alpha1.NodeGroup) bool { return g.Name == name }) {
			return nil, fmt.Errorf("spec.scope.nodeGroups: node group %q does not exist", name)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("spec.scope: selects no node group")
	}
	return out, nil
}

// ErrNeverFires is returned for a cron expression that names no time that
// exists (e.g. "0 0 30 2 *", February 30th).
var ErrNeverFires = errors.New("the cron expression never fires")

// ScheduleActive reports whether a window that starts at the cron times
// (UTC) and lasts d is open at now. An expression with no time in the next
// five years (the cron library's search horizon) is ErrNeverFires.
func ScheduleActive(expr string, d time.Duration, now time.Time) (bool, error) {
	s, err := parseCron(expr)
	if err != nil {
		return false, err
	}
	// The window is open when a start falls in (now-d, now]. Next returns
	// the zero time when it finds no start at all.
	start := s.Next(now.UTC().Add(-d))
	if start.IsZero() {
		return false, fmt.Errorf("%w: %q", ErrNeverFires, expr)
	}
	return !start.After(now.UTC()), nil
}

// ReadsPods reports whether Resolve reads Inputs.Pods for h: only
// automatic headroom sizes from the workload. A caller may leave the
// pods out otherwise (on a large cluster, listing them is most of a
// reconcile's cost).
func ReadsPods(h *v1alpha1.Headroom) bool { return h.Spec.Automatic != nil }

// isWorkload reports whether a pod counts as workload for automatic
// headroom: not a DaemonSet pod, not one of berth's own pods, not finished.
func isWorkload(p *corev1.Pod) bool {
	return p.Labels[v1alpha1.LabelHeadroomRole] == "" && !podutil.IsTerminal(p) && !podutil.IsOwnedByDaemonSet(p)
}

// workload sums the requests of the workload pods running in scope and
// collects their request shapes.
func workload(in Inputs, groups []*v1alpha1.NodeGroup) (corev1.ResourceList, []corev1.ResourceList) {
	inScope := map[string]bool{}
	for _, n := range in.Nodes {
		g := n.Labels[v1alpha1.LabelNodeGroup]
		if groups == nil || slices.ContainsFunc(groups, func(x *v1alpha1.NodeGroup) bool { return x.Name == g }) {
			inScope[n.Name] = true
		}
	}
	total := corev1.ResourceList{}
	var shapes []corev1.ResourceList
	for _, p := range in.Pods {
		if p.Spec.NodeName == "" || !inScope[p.Spec.NodeName] || !isWorkload(p) {
			continue
		}
		req := resource.PodRequests(p, resource.PodResourcesOptions{})
		for name, q := range req {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
		shapes = append(shapes, req)
	}
	return total, shapes
}

// statusShape is the unit shape a headroom's status holds (nil: none).
func statusShape(h *v1alpha1.Headroom) corev1.ResourceList {
	if h.Status.Unit == nil {
		return nil
	}
	return h.Status.Unit.Resources
}

// keepShareOfMostCommon is how many of the most common shape's pods
// (in fifths) the pods of the shape in use must at least be to keep it:
// two shapes about as common would otherwise swap as pods come and go,
// and every placeholder be replaced each time.
const keepShareOfMostCommon = 4

// mostCommon returns the most frequent request shape (cpu and memory); ties
// go to the larger one. The shape in use (current, nil: none) stays while
// its pods are at least 4/5 as many as the most common shape's. nil when
// there is none.
func mostCommon(shapes []corev1.ResourceList, current corev1.ResourceList) corev1.ResourceList {
	type key struct{ cpu, mem int64 }
	counts := map[key]int{}
	var best key
	bestN := 0
	for _, s := range shapes {
		k := key{s.Cpu().MilliValue(), s.Memory().Value()}
		if k.cpu == 0 && k.mem == 0 {
			continue
		}
		counts[k]++
		n := counts[k]
		if n > bestN || (n == bestN && (k.cpu > best.cpu || (k.cpu == best.cpu && k.mem > best.mem))) {
			best, bestN = k, n
		}
	}
	if bestN == 0 {
		return nil
	}
	if current != nil {
		cur := key{current.Cpu().MilliValue(), current.Memory().Value()}
		if n := counts[cur]; n > 0 && n*5 >= bestN*keepShareOfMostCommon {
			best = cur
		}
	}
	out := corev1.ResourceList{}
	if best.cpu > 0 {
		out[corev1.ResourceCPU] = *resourceMilli(best.cpu)
	}
	if best.mem > 0 {
		out[corev1.ResourceMemory] = *resourceBytes(best.mem)
	}
	return out
}

// unitsFor is how many units of shape unit cover pct percent of total: the
// largest count any resource of the unit needs, rounded up. It is a float:
// the caller bounds it (clampUnits), as it can exceed any integer type.
func unitsFor(total corev1.ResourceList, pct int32, unit corev1.ResourceList) float64 {
	n := 0.0
	for name, u := range unit {
		per := u.AsApproximateFloat64()
		if per <= 0 {
			continue
		}
		have := total[name]
		want := have.AsApproximateFloat64() * float64(pct) / 100
		n = max(n, math.Ceil(want/per-1e-9))
	}
	return n
}

// parseCron parses a standard cron expression in UTC. Time zone prefixes
// are refused (berth's windows are UTC), and a panic of the cron library
// on malformed input (it slices "TZ=" without a space out of range) is
// turned into an error: nothing a user writes may crash the controller.
func parseCron(expr string) (s cron.Schedule, err error) {
	if t := strings.TrimSpace(expr); strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return nil, fmt.Errorf("cron %q: time zones are not supported, windows are in UTC", expr)
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("cron %q: malformed expression", expr)
		}
	}()
	return cron.ParseStandard(expr)
}

// negativeQuantities rejects a spec that asks for a negative quantity (the
// API's quantity pattern admits a sign): a unit of -1 cpu would fit
// anywhere and report Ready while holding nothing, and lower what a node
// seems to hold for the units beside it.
func negativeQuantities(sp *v1alpha1.HeadroomSpec) error {
	lists := map[string]corev1.ResourceList{}
	if sp.Units != nil {
		lists["spec.units.resources"] = sp.Units.Resources
	}
	for _, w := range sp.Schedules {
		lists[fmt.Sprintf("spec.schedules[%s].units.resources", w.Name)] = w.Units.Resources
	}
	if sp.Automatic != nil && sp.Automatic.Unit != nil {
		lists["spec.automatic.unit.resources"] = sp.Automatic.Unit.Resources
	}
	if sp.PerNode != nil {
		lists["spec.perNode.resources"] = sp.PerNode.Resources
	}
	for _, field := range slices.Sorted(maps.Keys(lists)) {
		if err := quantity.Negative(field, lists[field]); err != nil {
			return err
		}
	}
	return nil
}
