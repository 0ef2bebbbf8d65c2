package sim

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/component-helpers/resource"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// headroomState resolves the Headrooms as the headroom controller does
// (internal/headroom.Resolve): units without placeholders are virtual
// pods in every plan; units with placeholders are real pods of low
// priority that the scheduler model binds and real pods preempt.
type headroomState struct {
	e *Engine
	// desired and ready units per Headroom, after the last round.
	desired, ready map[string]int32
	// onNode adds up the cpu of the virtual units the last plan put on
	// each node, each at its own Headroom's unit.
	onNode   map[string]float64
	resolved map[string]hr.Resolved
	// phase of each target (Learning, Sized, Capped) after the last round.
	phase map[string]string
	// last are the virtual units of the last round (scale-down keeps
	// them a home).
	last []*corev1.Pod
	seq  int
}

func newHeadroomState(e *Engine) *headroomState {
	return &headroomState{e: e, desired: map[string]int32{}, ready: map[string]int32{}, onNode: map[string]float64{}, resolved: map[string]hr.Resolved{}, phase: map[string]string{}}
}

// resolve computes each Headroom's units now.
func (h *headroomState) resolve() map[*v1alpha1.Headroom]hr.Resolved {
	in := hr.Inputs{Now: h.e.now, NodeGroups: h.e.cfg.NodeGroups, DaemonSets: daemonset.Pods(h.e.cfg.DaemonSets)}
	for _, n := range h.e.nodes {
		if n.ready {
			in.Nodes = append(in.Nodes, n.obj)
		}
	}
	in.Targets = h.e.learner.targets(in.Nodes)
	for _, p := range h.e.pods {
		if p.isBound() && p.placeholder == "" {
			in.Pods = append(in.Pods, p.obj)
		}
	}
	out := map[*v1alpha1.Headroom]hr.Resolved{}
	for _, x := range h.e.cfg.Headrooms {
		r, err := hr.Resolve(x, in)
		if err != nil {
			continue // as the controller: the Headroom reports its error
		}
		out[x] = r
		h.desired[x.Name] = r.Total()
		h.resolved[x.Name] = r
		if r.Target != nil {
			h.phase[x.Name] = r.Target.Phase
		}
	}
	return out
}

// virtual resolves the Headrooms, keeps the placeholders of those that
// have them, and returns the virtual units of the others.
func (h *headroomState) virtual() []*corev1.Pod {
	var sets []clusterread.Set
	resolved := h.resolve()
	for _, x := range h.e.cfg.Headrooms {
		r, ok := resolved[x]
		if !ok {
			continue
		}
		if x.Spec.Placeholders {
			h.placeholders(x, r)
			// The learned shapes' units are virtual, as in the controller.
			r.Count = 0
		}
		sets = append(sets, clusterread.ResolvedSet(x, r))
	}
	// At most as many units together as the controller plans.
	units, _ := clusterread.MakeUnits(sets, clusterread.DefaultMaxUnits)
	h.last = clusterread.UnitPods(units)
	return h.last
}

// placeholders keeps a Headroom's placeholder pods at its unit count, as
// its Deployment would.
func (h *headroomState) placeholders(x *v1alpha1.Headroom, r hr.Resolved) {
	var mine []*pod
	for _, p := range h.e.pods {
		if p.placeholder == x.Name {
			mine = append(mine, p)
		}
	}
	// Unbound ones go first when there are too many.
	slices.SortFunc(mine, func(a, b *pod) int {
		if a.isBound() != b.isBound() {
			if a.isBound() {
				return 1
			}
			return -1
		}
		return strings.Compare(a.key(), b.key())
	})
	for len(mine) > int(r.Count) {
		h.e.deletePod(mine[0])
		mine = mine[1:]
	}
	tmpl := hr.PlaceholderTemplate(x, r)
	for range int(r.Count) - len(mine) {
		h.seq++
		obj := &corev1.Pod{Spec: *tmpl.Spec.DeepCopy()}
		prio := v1alpha1.PriorityHeadroom
		obj.Spec.Priority = &prio
		obj.Namespace, obj.Name = v1alpha1.SystemNamespace, fmt.Sprintf("placeholder-%s-%d", x.Name, h.seq)
		obj.Labels = tmpl.Labels
		obj.UID = "sim-" + typesUID(obj.Namespace, obj.Name)
		obj.OwnerReferences = ownerRef(v1alpha1.SystemNamespace + "/headroom-" + x.Name)
		obj.Status.Phase = corev1.PodPending
		p := &pod{obj: obj, created: h.e.now, trace: obj.Namespace + "/" + obj.Name, placeholder: x.Name}
		h.e.addPod(p)
	}
}

// readiness counts, per Headroom, the units in free room on Ready nodes:
// the virtual units the plan put on existing Ready nodes and the bound
// placeholders.
func (h *headroomState) readiness(plan *scaleup.Plan, e *Engine) {
	clear(h.ready)
	clear(h.onNode)
	// Each unit's own cpu: a learned shape's units are larger than the
	// Headroom's unit.
	unitCPU := map[string]float64{}
	for _, u := range h.last {
		q := resource.PodRequests(u, resource.PodResourcesOptions{})[corev1.ResourceCPU]
		unitCPU[u.Name] = q.AsApproximateFloat64()
	}
	for _, pl := range plan.ExistingNodePlacements {
		if !strings.HasPrefix(pl.Pod.Name, "headroom-") || pl.Pod.Namespace != v1alpha1.SystemNamespace {
			continue
		}
		if n := e.nodes[pl.Node]; n != nil && n.ready {
			h.ready[headroomOf(pl.Pod.Name)]++
			h.onNode[pl.Node] += unitCPU[pl.Pod.Name]
		}
	}
	for _, p := range e.podList() {
		if p.placeholder != "" && p.isBound() {
			h.ready[p.placeholder]++
		}
	}
}

// headroomOf is the Headroom of a virtual unit named headroom-<name>-<i>.
func headroomOf(unit string) string {
	name := strings.TrimPrefix(unit, "headroom-")
	if i := strings.LastIndex(name, "-"); i > 0 {
		return name[:i]
	}
	return name
}

func (h *headroomState) nodeReady(*node) {}

// preempted deletes a placeholder a real pod preempted; its Deployment
// makes a new one, pending (it asks for a node).
func (e *Engine) preempted(p *pod) {
	e.deletePod(p)
	e.metrics.preemptions++
	if x := e.headroomByName(p.placeholder); x != nil {
		e.headroom.placeholders(x, e.headroom.resolved[x.Name])
	}
}

func (e *Engine) headroomByName(name string) *v1alpha1.Headroom {
	for _, x := range e.cfg.Headrooms {
		if x.Name == name {
			return x
		}
	}
	return nil
}
