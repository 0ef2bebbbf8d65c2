package provisioning

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
)

// launchWorkers bounds how many nodes one round launches at once. Cloud
// APIs take seconds per launch; one after another, a plan of 30 nodes would
// wait minutes for its last node.
const launchWorkers = 16

// launchOutcome is what launching one planned node came to.
type launchOutcome struct {
	instance *cloudprovider.Instance
	// unavailable is set when the launch failed: the offering is avoided.
	unavailable *scaleup.Offering
	// atMaxSize: the provider refused, the group is full (another
	// launcher's nodes the round's view did not show yet, or machines
	// the provider counts that have no node).
	atMaxSize bool
	group     string
	err       error
}

// launch creates the plan's new nodes, up to launchWorkers at once, and
// nominates each node's pods to it. It returns true when a launch failed,
// so that the caller plans again without that offering (the nodes that
// did launch are then part of the cluster the new plan starts from). A
// launch refused at the group's maxSize blames no offering: the group is
// left out of the rounds for fullFor (fullOfferings), and the caller
// plans again without it.
func (p *Provisioner) launch(ctx context.Context, plan *scaleup.Plan, groups map[string]*v1alpha1.NodeGroup,
	pending map[types.NamespacedName]*corev1.Pod, res *Result) (bool, error) {
	outcomes := make([]launchOutcome, len(plan.NewNodes))
	workqueue.ParallelizeUntil(ctx, launchWorkers, len(plan.NewNodes), func(i int) {
		// A panic in a worker (a provider's) would end the process:
		// ParallelizeUntil's crash handler panics again, on a goroutine
		// the round's own recover does not cover. It fails this launch.
		defer func() {
			if r := recover(); r != nil {
				outcomes[i] = launchOutcome{err: fmt.Errorf("launching a node of node group %s panicked: %v\n%s", plan.NewNodes[i].NodeGroup, r, debug.Stack())}
			}
		}()
		outcomes[i] = p.launchOne(ctx, plan.NewNodes[i], groups[plan.NewNodes[i].NodeGroup], pending)
	})
	failed := false
	var errs []error
	for _, o := range outcomes {
		switch {
		case o.instance != nil:
			res.Launched = append(res.Launched, o.instance)
		case o.unavailable != nil:
			res.Failed = append(res.Failed, *o.unavailable)
			failed = true
		case o.atMaxSize:
			p.full[o.group] = p.Clock.Now().Add(fullFor)
			failed = true
		case o.err != nil:
			errs = append(errs, o.err)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return failed, errors.Join(errs...)
}

// maxTransientFailures is how many rounds in a row may fail to launch an
// offering with an error of the API call itself (a conflict, a timeout, a
// 5xx, throttling) before the failure is the offering's after all: a
// webhook that denies with a 500, or throttling that never ends, would
// otherwise be retried on the same offering for ever, with no other
// offering tried and no pod told. The launches of one round count once:
// they run in parallel and one outage fails them all. A conflict never
// counts: parallel launches into one Cluster API object conflict as a
// matter of course.
const maxTransientFailures = 3

// transientStreak is an offering's run of rounds whose launches of it
// failed with a transient error, and the last of them.
type transientStreak struct {
	rounds int
	last   uint64
}

// transientFailure counts a launch of off that failed with a transient
// error, once a round, and returns in how many rounds in a row one did.
func (p *Provisioner) transientFailure(off scaleup.Offering) int {
	p.transientMu.Lock()
	defer p.transientMu.Unlock()
	s := p.transient[off]
	switch {
	case s.rounds > 0 && s.last == p.roundID: // another launch of the same round
	case s.rounds > 0 && s.last+1 == p.roundID:
		s.rounds, s.last = s.rounds+1, p.roundID
	default: // the first, or after a round that did not fail it: a new run
		s.rounds, s.last = 1, p.roundID
	}
	p.transient[off] = s
	return s.rounds
}

// transientOver ends off's run of transient failures.
func (p *Provisioner) transientOver(off scaleup.Offering) {
	p.transientMu.Lock()
	defer p.transientMu.Unlock()
	delete(p.transient, off)
}

// launchOne launches one planned node and nominates its pods to it. Safe
// to run concurrently for different nodes.
func (p *Provisioner) launchOne(ctx context.Context, nn scaleup.NewNode, ng *v1alpha1.NodeGroup, pending map[types.NamespacedName]*corev1.Pod) launchOutcome {
	logger := log.FromContext(ctx)
	off := cloudprovider.OfferingOf(nn.Offering())
	inst, err := p.Cloud.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: off})
	if err != nil && ctx.Err() != nil {
		return launchOutcome{err: ctx.Err()} // shutting down: not the offering's fault
	}
	if cloudprovider.IsMaxSize(err) {
		// Another launcher (the standby tier) filled the group since the
		// round's view: nothing launched, the offering is not at fault.
		launches.WithLabelValues(nn.NodeGroup, resultFailed, reasonMaxSize).Inc()
		logger.Info("launch refused: the node group is at its maxSize", "nodeGroup", nn.NodeGroup, "offering", off.String(), "reason", err.Error())
		return launchOutcome{atMaxSize: true, group: nn.NodeGroup}
	}
	transient := err != nil && cloudprovider.IsTransient(err)
	if transient && (apierrors.IsConflict(err) || p.transientFailure(nn.Offering()) < maxTransientFailures) {
		// The API call failed, not the offering: the round is retried at
		// once (with backoff) instead of avoiding the offering for minutes.
		launches.WithLabelValues(nn.NodeGroup, resultFailed, reasonError).Inc()
		return launchOutcome{err: fmt.Errorf("launching %s in node group %s: %w", off, nn.NodeGroup, err)}
	}
	if !transient {
		p.transientOver(nn.Offering()) // a success, or a failure of the offering's own, ends the run
	}
	if err != nil {
		// Every failed launch is the offering's: it is avoided (for longer
		// each time it fails again) and the round plans again without it, so
		// one broken offering never stops the other pods, node groups or
		// headroom.
		failed := nn.Offering()
		p.Offerings.MarkUnavailable(failed, state.LaunchReason(cloudprovider.IsInsufficientCapacity(err)), err.Error())
		if p.Holds != nil {
			for _, ref := range nn.Pods {
				if pending[ref.Key()] != nil {
					p.Holds.LaunchFailed(ref.Key(), nn.NodeGroup, err.Error())
				}
			}
		}
		why := reasonError
		if cloudprovider.IsInsufficientCapacity(err) {
			why = reasonInsufficientCapacity
		}
		launches.WithLabelValues(nn.NodeGroup, resultFailed, why).Inc()
		p.Recorder.Eventf(ng, nil, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch",
			"Launching %s failed: %v; avoiding it for a while and trying the next cheapest offering", off, err)
		logger.Info("launch failed, planning again without the offering", "nodeGroup", nn.NodeGroup, "offering", off.String(), "error", err.Error())
		return launchOutcome{unavailable: &failed}
	}
	if inst == nil {
		return launchOutcome{err: fmt.Errorf("launching %s in node group %s: the provider returned no instance and no error", off, nn.NodeGroup)}
	}
	p.inflight.add(syntheticNode(ng, inst, p.daemons))
	p.launched(ctx, nn, ng, off, inst, resultLaunched, pending)
	return launchOutcome{instance: inst}
}

// launched records a node launched (or resumed from standby) for a
// planned node and nominates the node's pods to it.
func (p *Provisioner) launched(ctx context.Context, nn scaleup.NewNode, ng *v1alpha1.NodeGroup, off cloudprovider.Offering, inst *cloudprovider.Instance,
	result string, pending map[types.NamespacedName]*corev1.Pod) {
	reason := reasonPendingPods
	switch {
	case nn.Reason == scaleup.ReasonMinSize:
		reason = reasonMinSize
	case p.onlyVirtual(nn):
		reason = reasonHeadroom
	}
	verb, doing := "Launched", "Launching"
	if result == resultResumed {
		verb, doing = "Resumed standby", "Resuming standby"
	}
	launches.WithLabelValues(nn.NodeGroup, result, reason).Inc()
	p.Activity.ScaledUp(nn.NodeGroup, state.ScaleEvent{Time: p.Clock.Now(), Node: inst.NodeName, Reason: activityReason[reason],
		Message: fmt.Sprintf("%s for %s", off, describePods(nn))})
	log.FromContext(ctx).Info(strings.ToLower(verb)+" node", "node", inst.NodeName, "nodeGroup", nn.NodeGroup, "offering", off.String(),
		"pricePerHour", nn.PricePerHour, "pods", len(nn.Pods), "reason", reason)
	p.Recorder.Eventf(ng, nil, corev1.EventTypeNormal, ReasonLaunched, "Launch",
		"%s node %s (%s, %.4f/h) for %s", verb, inst.NodeName, off, nn.PricePerHour, describePods(nn))
	for _, ref := range nn.Pods {
		if pod := pending[ref.Key()]; pod != nil {
			p.record(pod, corev1.EventTypeNormal, ReasonTriggeredScaleUp, fmt.Sprintf("%s node %s (node group %s, %s) for this pod", doing, inst.NodeName, nn.NodeGroup, off))
			p.nominate(ctx, pod, inst.NodeName, nn.NodeGroup) // each pod is on one planned node: no two workers touch it
		}
	}
}

// nominate sets the pod's status.nominatedNodeName to the node launched for
// it (KEP-5278, NominatedNodeNameForExpectation, on by default since
// Kubernetes 1.35): the scheduler tries that node first and keeps its room
// for the pod, so that pods land where the plan put them instead of being
// spread in a way that leaves one without a home. A failure is logged, not
// fatal: the pod is then scheduled as usual.
// group is the node's node group ("": recorded already, or not known).
func (p *Provisioner) nominate(ctx context.Context, pod *corev1.Pod, node, group string) {
	p.nominated.set(client.ObjectKeyFromObject(pod), node, group)
	pod = pod.DeepCopy() // the cache's object (clusterread.Cluster): never changed
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Status.NominatedNodeName = node
	if err := p.Client.Status().Patch(ctx, pod, patch); err != nil {
		log.FromContext(ctx).V(1).Info("could not nominate the launched node for the pod", "pod", client.ObjectKeyFromObject(pod), "node", node, "error", err.Error())
	}
}

// onlyVirtual reports whether every pod planned on a new node is a
// headroom unit or buffer chunk.
func (p *Provisioner) onlyVirtual(nn scaleup.NewNode) bool {
	for _, ref := range nn.Pods {
		if _, ok := p.virtualOwner[ref.Key()]; !ok {
			return false
		}
	}
	return len(nn.Pods) > 0
}

func describePods(nn scaleup.NewNode) string {
	if nn.Reason == scaleup.ReasonMinSize && len(nn.Pods) == 0 {
		return "minSize"
	}
	names := make([]string, 0, 3)
	for i, ref := range nn.Pods {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(nn.Pods)-3))
			break
		}
		names = append(names, ref.String())
	}
	return fmt.Sprintf("%d pending pods (%s)", len(nn.Pods), strings.Join(names, ", "))
}

// explain records, on every pod the plan could not place, why.
func (p *Provisioner) explain(plan *scaleup.Plan, pending map[types.NamespacedName]*corev1.Pod) {
	if plan == nil {
		return
	}
	for _, u := range plan.Unschedulable {
		if pod := pending[u.Pod.Key()]; pod != nil {
			p.record(pod, corev1.EventTypeWarning, ReasonNotTriggerScaleUp, "No node can be launched for this pod: "+u.Message)
		}
	}
	// Forget pods that are no longer pending.
	live := map[types.UID]bool{}
	for _, pod := range pending {
		live[pod.UID] = true
	}
	p.podEvents.retain(func(uid types.UID) bool { return live[uid] })
}

// record emits an event on a pod unless the same message was the last one.
func (p *Provisioner) record(pod *corev1.Pod, eventType, reason, msg string) {
	p.podEvents.say(pod.UID, pod, eventType, reason, "Provision", msg)
}

// activityReason names a launch's reason in NodeGroup status.
var activityReason = map[string]string{reasonPendingPods: "PendingPods", reasonMinSize: "MinSize", reasonHeadroom: "Headroom"}
