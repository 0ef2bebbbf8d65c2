package sim

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
)

// needCapacity asks for a provisioning round: BatchIdle after the last
// pod that found no node, at most BatchMax after the first (the
// controller's batch window).
func (e *Engine) needCapacity() {
	if e.batchStart.IsZero() {
		e.batchStart = e.now
	}
	at := e.now.Add(e.cfg.BatchIdle)
	if limit := e.batchStart.Add(e.cfg.BatchMax); at.After(limit) {
		at = limit
	}
	e.provisionSoon(at)
}

// provisionSoon makes sure a provisioning round runs at at or earlier.
func (e *Engine) provisionSoon(at time.Time) {
	if !e.provisionAt.IsZero() && !e.provisionAt.After(at) && e.provisionAt.After(e.now.Add(-time.Nanosecond)) {
		return
	}
	e.provisionAt = at
	e.schedule(at, evProvision, "")
}

// provision is one provisioning round: pods held by a nomination berth
// made stay planned on their node for the node's boot and a grace after
// it; pods that found no node and the headroom units are planned by the
// scale-up planner; its new nodes are launched and their pods nominated.
func (e *Engine) provision() {
	if !e.provisionAt.Equal(e.now) {
		return // a later or earlier request superseded this one
	}
	e.provisionAt = time.Time{}
	e.batchStart = time.Time{}
	defer e.provisionSoon(e.now.Add(e.cfg.Resync))
	in := scaleup.Input{NodeGroups: e.cfg.NodeGroups, DaemonSets: e.cfg.DaemonSets, Limits: e.cfg.Limits,
		Now: e.now, LaunchGrace: launchGrace, Nominated: map[types.NamespacedName]string{}}
	in.Nodes = e.resumableNodes(e.nodeObjects())
	for _, p := range e.podList() {
		switch {
		case p.isBound():
			in.Pods = append(in.Pods, p.obj)
		case p.nominated != "" && e.holds(p):
			in.Pods = append(in.Pods, podutil.HeldOn(p.obj, p.nominated))
			in.Nominated[types.NamespacedName{Namespace: p.obj.Namespace, Name: p.obj.Name}] = p.nominated
		case p.tried:
			p.nominated = ""
			in.Pending = append(in.Pending, p.obj)
		}
	}
	units := e.headroom.virtual()
	in.Pending = append(in.Pending, units...)
	plan, err := scaleup.Run(in)
	if err != nil {
		e.fail(fmt.Errorf("planning scale-up: %w", err))
		return
	}
	e.headroom.readiness(plan, e)
	e.resumePlaced(plan)
	for _, nn := range plan.NewNodes {
		e.launch(nn)
	}
	e.keepStandby()
}

// holds reports whether a nomination still holds the pod's room: its node
// boots, or turned Ready less than nominationGrace ago.
func (e *Engine) holds(p *pod) bool {
	n := e.nodes[p.nominated]
	return n != nil && (!n.ready || e.now.Sub(n.readyAt) < nominationGrace)
}

// launch creates a planned node, Ready after the group's launch delay, and
// nominates the plan's pods to it.
func (e *Engine) launch(nn scaleup.NewNode) *node {
	g := e.groups[nn.NodeGroup]
	off := cloudprovider.OfferingOf(nn.Offering())
	e.nodeSeq++
	name := fmt.Sprintf("%s-%d", g.Name, e.nodeSeq)
	obj := cloudprovider.NodeFor(g, off, name)
	if obj == nil {
		e.fail(fmt.Errorf("node group %s has no offering %s", g.Name, off))
		return nil
	}
	obj.CreationTimestamp = metav1.NewTime(e.now)
	delay := e.launchDelay(g)
	if e.warming {
		delay = 0 // the cluster the trace began with was there
	}
	n := &node{obj: obj, group: g.Name, price: nn.PricePerHour, instance: nn.InstanceType, capacity: nn.CapacityType,
		launchedAt: e.now, readyAt: e.now.Add(delay), atStart: e.warming}
	e.nodes[name] = n
	e.schedule(n.readyAt, evNodeReady, name)
	real := e.nominate(n, nn)
	n.headroom = real == 0 && nn.Reason != scaleup.ReasonMinSize && nn.Reason != reasonReplacement
	e.logf("launch %s (%s %s %s, %s) for %d pods, ready in %s", name, nn.InstanceType, nn.Zone, nn.CapacityType, nn.Reason, real, delay)
	e.metrics.launched(n, nn.Reason, n.headroom)
	e.dirty = true
	return n
}

// nominate nominates the planned node's pending pods to n and returns
// how many there were.
func (e *Engine) nominate(n *node, nn scaleup.NewNode) int {
	real := 0
	for _, ref := range nn.Pods {
		if p := e.pods[ref.Namespace+"/"+ref.Name]; p != nil && !p.isBound() {
			p.nominated, p.nominatedAt = n.obj.Name, e.now
			real++
		}
	}
	e.dirty = true
	return real
}

func (e *Engine) launchDelay(g *v1alpha1.NodeGroup) time.Duration {
	if e.cfg.LaunchDelay != nil {
		if d := e.cfg.LaunchDelay(g.Name, e.rng); d >= 0 {
			return d
		}
	}
	if k := g.Spec.Provider.KWOK; k != nil && k.LaunchDelay != nil {
		return k.LaunchDelay.Duration
	}
	return DefaultLaunchDelay
}

// nodeReady turns a launched node Ready: it takes pods.
func (e *Engine) nodeReady(name string) {
	n := e.nodes[name]
	if n == nil || n.ready || n.suspended || e.now.Before(n.readyAt) {
		return // gone, Ready, suspended, or resumed again since this event
	}
	if n.standbyFor != "" {
		e.suspend(n) // booted for the standby tier: no pod may land on it
		return
	}
	readyNode(n.obj, e.groups[n.group])
	n.obj.Status.Conditions[0].LastTransitionTime = metav1.NewTime(e.now)
	n.ready = true
	e.logf("ready %s", name)
	e.sched.addNode(n)
	e.headroom.nodeReady(n)
	e.dirty = true
	// Pods nominated to it get their grace; then they are planned again.
	e.provisionSoon(e.now.Add(nominationGrace + time.Millisecond))
}
