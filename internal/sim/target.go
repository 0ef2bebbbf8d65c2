package sim

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// learner is the headroom-target controller's learning in the simulation
// (internal/controller/headroomtarget): the same demand history and
// recorder, fed by the simulated bindings and deletions, estimated at
// every provisioning round.
type learner struct {
	e      *Engine
	byName map[string]*learned
}

type learned struct {
	h        *v1alpha1.Headroom
	groups   map[string]bool
	selector labels.Selector
	rec      *demand.Recorder
	// burst counts the first BurstWindow of bursts (spec.standby).
	burst *demand.Recorder
	// shapes learns the pods larger than a unit apart
	// (spec.target.shapes Learned).
	shapes *demand.Shapes
	// waits are the waits of the pods it counts, for demand.Corrected.
	waits demand.Waits
	// within and judged count the pods the target is about (its scope
	// and pod selector; pods that never got a node by the selector
	// alone) and those of them that got capacity within its wait: the
	// report's Within.
	within, judged int
}

// judge counts a pod the target is about that waited wait.
func (x *learned) judge(wait time.Duration) {
	x.judged++
	if wait <= x.h.Spec.Target.Wait.Duration {
		x.within++
	}
}

// judgeUnbound counts, for every target whose pod selector selects it
// and whose scope has a group that could take it (its taints tolerated,
// its labels matching the pod's required node selection), a pod of the
// trace that never got a node (deleted while it waited, or pending at
// the end), with its wait until then.
func (l *learner) judgeUnbound(p *pod, wait time.Duration) {
	for _, x := range l.byName {
		if x.rec != nil && !p.running && p.placeholder == "" && !isDaemon(p.obj) &&
			(x.selector == nil || x.selector.Matches(labels.Set(p.obj.Labels))) && l.inScope(x, p) {
			x.judge(wait)
		}
	}
}

// inScope reports whether a group of the target's scope (every group for
// none) could take the pod, room aside.
func (l *learner) inScope(x *learned, p *pod) bool {
	aff := nodeaffinity.GetRequiredNodeAffinity(p.obj)
	for _, g := range l.e.cfg.NodeGroups {
		if (x.groups == nil || x.groups[g.Name]) && snapshot.GroupCouldTake(g, aff, p.obj.Spec.Tolerations) {
			return true
		}
	}
	return false
}

func newLearner(e *Engine) *learner {
	l := &learner{e: e, byName: map[string]*learned{}}
	for _, h := range e.cfg.Headrooms {
		if h.Spec.Target == nil {
			continue
		}
		x := &learned{h: h}
		if ps := h.Spec.Target.PodSelector; ps != nil {
			if sel, err := metav1.LabelSelectorAsSelector(ps); err == nil {
				x.selector = sel
			}
		}
		if scope, err := hr.ScopeGroups(h, e.cfg.NodeGroups); err == nil && scope != nil {
			x.groups = map[string]bool{}
			for _, g := range scope {
				x.groups[g.Name] = true
			}
		}
		l.byName[h.Name] = x
	}
	return l
}

func (x *learned) counts(p *pod, group string) bool {
	if p.placeholder != "" || isDaemon(p.obj) || (x.groups != nil && !x.groups[group]) {
		return false
	}
	return x.selector == nil || x.selector.Matches(labels.Set(p.obj.Labels))
}

// bound feeds a pod's arrival to the Headrooms whose scope it landed in.
func (l *learner) bound(p *pod, group string) {
	for _, x := range l.byName {
		if x.rec != nil && !p.running && x.counts(p, group) {
			req := demand.RequestsOf(resource.PodRequests(p.obj, resource.PodResourcesOptions{}))
			wait := l.e.now.Sub(p.created)
			x.waits.Observe(l.e.now, wait, wait <= x.h.Spec.Target.Wait.Duration)
			x.judge(wait)
			if c := x.shapes.Route(req, p.created, l.e.now); c != nil {
				c.Arrived(p.created, l.e.now)
			}
			x.rec.Arrived(p.created, l.e.now, req)
			if x.burst != nil {
				x.burst.Arrived(p.created, l.e.now, req)
			}
		}
	}
}

// left feeds a bound pod's departure.
func (l *learner) left(p *pod, group string) {
	for _, x := range l.byName {
		if x.rec != nil && x.counts(p, group) {
			req := demand.RequestsOf(resource.PodRequests(p.obj, resource.PodResourcesOptions{}))
			if c := x.shapes.Find(req); c != nil {
				c.Left(l.e.now, l.e.now)
			}
			x.rec.Left(l.e.now, l.e.now, req)
			if x.burst != nil {
				x.burst.Left(l.e.now, l.e.now, req)
			}
		}
	}
}

// targets closes windows and returns the estimates for Resolve. A
// history given in Config.Histories (learned from another trace) is
// rebased to start now; a history of another window or shape starts
// again, as in the controller.
func (l *learner) targets(nodes []*corev1.Node) map[string]hr.TargetInput {
	if len(l.byName) == 0 {
		return nil
	}
	out := map[string]hr.TargetInput{}
	for name, x := range l.byName {
		scope, err := hr.ScopeGroups(x.h, l.e.cfg.NodeGroups)
		if err != nil {
			continue
		}
		window, measured := hr.LaunchWindow(hr.GroupsOrAll(scope, l.e.cfg.NodeGroups), nodes)
		if !measured && x.rec != nil {
			window = x.rec.H.Window // no node to time: keep the window learned in
		}
		shape := demand.ShapeOf(hr.TargetShape(x.h))
		if len(shape) == 0 {
			continue
		}
		span := demand.DefaultHistory
		if d := x.h.Spec.Target.History; d != nil && d.Duration > 0 {
			span = d.Duration
		}
		if x.rec == nil || !x.rec.H.Matches(window, shape) {
			h := l.e.cfg.Histories[name]
			saved := l.e.cfg.Shapes[name]
			if h != nil && x.rec == nil && h.Matches(window, shape) {
				h = copyHistory(h)
				h.Rebase(l.e.now)
			} else {
				h, saved = demand.NewHistory(window, shape, span, l.e.now), nil
			}
			x.rec = demand.NewRecorder(h, l.e.now)
			x.shapes = nil
			if x.h.Spec.Target.LearnsShapes() {
				x.shapes = demand.NewShapes(shape, h.Window, span)
				if saved != nil {
					x.shapes.Restore(saved.Rebased(l.e.now), l.e.now)
				}
			}
		}
		x.rec.Close(l.e.now)
		share := hr.Share(x.h.Spec.Target)
		share = demand.Corrected(share, x.waits.Over(l.e.now, 24*time.Hour, share))
		in := hr.TargetInput{Estimate: x.rec.H.Estimate(l.e.now, share), Window: window}
		if x.shapes != nil {
			x.shapes.Close(l.e.now)
			in.Shapes = x.shapes.Estimates(l.e.now, share, demand.MinHistory)
		}
		if x.h.Spec.Standby != nil {
			resume, measured := hr.ResumeWindow(hr.GroupsOrAll(scope, l.e.cfg.NodeGroups), nodes, window)
			have := time.Duration(0)
			if x.burst != nil {
				have = x.burst.H.Window
			}
			in.BurstWindow = hr.FollowBurstWindow(have, hr.BurstWindowRounded(resume, x.h.Spec.Target.Wait.Duration), measured)
			in.BurstKnown = true
			x.burst = l.followBurst(name, x.burst, in.BurstWindow, shape, span)
			if x.burst != nil {
				x.burst.Close(l.e.now)
				est := x.burst.H.Estimate(l.e.now, share)
				in.Burst = &est
			}
		}
		out[name] = in
	}
	return out
}

// followBurst keeps the burst recorder in the window: the one it has,
// else one on Config.BurstHistories' (rebased) when it matches, else a
// new one; nil when no burst window is needed.
func (l *learner) followBurst(name string, rec *demand.Recorder, window time.Duration, shape demand.Shape, span time.Duration) *demand.Recorder {
	switch {
	case window <= 0:
		return nil
	case rec != nil && rec.H.Matches(window, shape):
		return rec
	}
	if h := l.e.cfg.BurstHistories[name]; rec == nil && h != nil && h.Matches(window, shape) {
		h = copyHistory(h)
		h.Rebase(l.e.now)
		return demand.NewRecorder(h, l.e.now)
	}
	return demand.NewRecorder(demand.NewHistory(window, shape, span, l.e.now), l.e.now)
}

// burstHistories are the learned burst histories at the end
// (Result.BurstHistories).
func (l *learner) burstHistories() map[string]*demand.History {
	out := map[string]*demand.History{}
	for name, x := range l.byName {
		if x.burst != nil {
			x.burst.Close(l.e.now)
			out[name] = x.burst.H
		}
	}
	return out
}

// shapes are the shapes learned apart at the end (Result.Shapes).
func (l *learner) shapes() map[string]*demand.Saved {
	out := map[string]*demand.Saved{}
	for name, x := range l.byName {
		if x.shapes != nil {
			x.shapes.Close(l.e.now)
			sv := x.shapes.Save()
			out[name] = &sv
		}
	}
	return out
}

// histories are the learned histories at the end (Result.Histories).
func (l *learner) histories() map[string]*demand.History {
	out := map[string]*demand.History{}
	for name, x := range l.byName {
		if x.rec != nil {
			x.rec.Close(l.e.now)
			out[name] = x.rec.H
		}
	}
	return out
}

func copyHistory(h *demand.History) *demand.History {
	c := *h
	for i := range c.Hours {
		c.Hours[i].Bins = append([]demand.Bin(nil), h.Hours[i].Bins...)
	}
	return &c
}
