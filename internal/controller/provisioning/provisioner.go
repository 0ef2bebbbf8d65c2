// Package provisioning is the controller that turns pending pods into
// nodes: it batches pods the scheduler could not place, plans the cheapest
// nodes that fit them (existing and launching nodes first), launches them
// through the cloud provider, falls back to the next offering when one has
// no capacity, and tells users on each pod what it is doing and why.
package provisioning

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/state"
)

// Name is the controller's name in logs and metrics.
const Name = "provisioning"

// Event reasons.
const (
	ReasonTriggeredScaleUp  = "TriggeredScaleUp"
	ReasonNotTriggerScaleUp = "NotTriggerScaleUp"
	ReasonLaunched          = "Launched"
	ReasonLaunchFailed      = "LaunchFailed"
)

// maxAttempts bounds how often one round re-plans after launch failures.
const maxAttempts = 5

// Options tune the provisioner.
type Options struct {
	// BatchIdle ends a batch when no new pending pod arrived for this long.
	BatchIdle time.Duration
	// BatchMax ends a batch this long after it started at the latest.
	BatchMax time.Duration
	// Resync re-plans this often even without events (minSize, expired
	// launch failures).
	Resync time.Duration
	// ClusterLimits cap the capacity of all nodes.
	ClusterLimits corev1.ResourceList
	// MaxProvisionTime is how long a launched node may take to become
	// Ready; until then the planner counts it as booting.
	MaxProvisionTime time.Duration
	// MaxVirtualPods caps the headroom units and buffer chunks of one round
	// (0: DefaultMaxVirtualPods).
	MaxVirtualPods int
}

// Deps are what the provisioner works with.
type Deps struct {
	Client    client.Client
	Cloud     cloudprovider.CloudProvider
	Offerings *state.Offerings
	// Readiness receives, after each round, how many headroom units and
	// buffer chunks fit in free capacity.
	Readiness *state.Readiness
	Recorder  events.EventRecorder
	Clock     clock.WithTicker
}

// Provisioner plans and launches nodes for pending pods.
type Provisioner struct {
	Deps
	opts     Options
	trigger  chan struct{}
	inflight *inflight
	// lastEvent is the last message recorded per pending pod, so that a pod
	// gets an event when what berth does for it changes, not every round.
	lastEvent map[types.UID]string
	eventMu   sync.Mutex // guards lastEvent and lastCapped: launches run in parallel
	// recovered is set once recoverState has run (rounds run one at a
	// time, from Start).
	recovered bool
	// lastCapped is the last VirtualUnitsCapped message per readiness key.
	lastCapped map[state.Key]string
	// nominated remembers, per pending pod ("namespace/name"), the
	// launching node berth planned it on. The scheduler clears the pod's
	// nominatedNodeName when it retries the pod before the node is Ready;
	// berth restores it at once (see keepNomination) and still plans the
	// pod there first, so that a later round does not pack the launching
	// nodes differently and launch one more.
	nominated   *nominations
	renominateQ chan *corev1.Pod
	// readySince is when each node was first seen Ready, to tell when a
	// nomination berth made has had its chance. Guarded by readyMu: pod
	// events read it.
	readyMu    sync.Mutex
	readySince map[string]time.Time
	// virtualOwner maps the virtual pods of the current round to the
	// readiness key of their headroom or buffer.
	virtualOwner map[string]state.Key
	// recheckAt is when the earliest nomination berth holds for a pod on a
	// schedulable node runs out of grace (zero: none). Nothing else
	// happens to such a pod then, so Start plans again at that time.
	recheckAt time.Time
}

// nominationGrace is how long after its node is Ready a pod berth nominated
// may stay unbound before berth plans for it again. Planning it again is
// cheap when its room is still there (the plan puts it back on that node);
// when the scheduler gave the room to another pod, the pod needs a node
// and should not wait long for it.
const nominationGrace = 5 * time.Second

// New returns a provisioner.
func New(d Deps, o Options) *Provisioner {
	return &Provisioner{Deps: d, opts: o, trigger: make(chan struct{}, 1), inflight: newInflight(d.Clock),
		lastEvent: map[types.UID]string{}, lastCapped: map[state.Key]string{}, nominated: newNominations(), renominateQ: make(chan *corev1.Pod, 1024),
		readySince: map[string]time.Time{}}
}

// Trigger asks for a round soon (after the batch window).
func (p *Provisioner) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Start runs rounds until ctx ends: after a trigger and its batch window, or
// every Resync.
func (p *Provisioner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName(Name)
	ctx = log.IntoContext(ctx, logger)
	resync := p.Clock.NewTicker(p.opts.Resync)
	defer resync.Stop()
	go p.keepNominations(ctx)
	var recheck <-chan time.Time
	failures := 0 // rounds failed in a row: the retry waits 1s, 2s, 4s ... maxRoundBackoff
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
			if !p.waitForBatch(ctx) {
				return nil
			}
		case <-resync.C():
		case <-recheck:
		}
		if err := p.safeRound(ctx); err != nil {
			failures++
			wait := min(time.Second<<min(failures-1, 6), maxRoundBackoff)
			logger.Error(err, "provisioning round failed; retrying", "in", wait.String())
			roundErrors.Inc()
			p.Clock.Sleep(wait)
			p.Trigger()
		} else {
			failures = 0
		}
		recheck = nil
		if !p.recheckAt.IsZero() {
			recheck = p.Clock.After(max(p.recheckAt.Sub(p.Clock.Now()), 100*time.Millisecond))
		}
	}
}

// maxRoundBackoff caps the wait before a failed round is retried.
const maxRoundBackoff = time.Minute

// safeRound runs one round and turns a panic into an error: nothing a user
// can create may take the controller down, and the next round goes on.
func (p *Provisioner) safeRound(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("provisioning round panicked: %v\n%s", r, debug.Stack())
		}
	}()
	_, err = p.RunOnce(ctx)
	return err
}

// waitForBatch returns when no trigger arrived for BatchIdle, or BatchMax
// after it was called; false if ctx ended.
func (p *Provisioner) waitForBatch(ctx context.Context) bool {
	deadline := p.Clock.After(p.opts.BatchMax)
	idle := p.Clock.NewTimer(p.opts.BatchIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return true
		case <-idle.C():
			return true
		case <-p.trigger:
			if !idle.Stop() {
				select {
				case <-idle.C():
				default:
				}
			}
			idle.Reset(p.opts.BatchIdle)
		}
	}
}

// Result summarises one round.
type Result struct {
	Pending int
	// PendingPods are the pods the round planned a node for, sorted.
	PendingPods []types.NamespacedName
	Plan        *scaleup.Plan
	Launched    []*cloudprovider.Instance
	Failed      []scaleup.Offering
}

// RunOnce plans for the pods pending now and launches the nodes of the
// plan. When an offering has no capacity it is marked unavailable and the
// rest of the round is planned again without it.
func (p *Provisioner) RunOnce(ctx context.Context) (*Result, error) {
	logger := log.FromContext(ctx)
	if !p.recovered {
		// Before the first round, read back what a previous leader knew.
		if err := p.recoverState(ctx); err != nil {
			return nil, fmt.Errorf("recovering state: %w", err)
		}
		p.recovered = true
	}
	in, groups, pending, err := p.gather(ctx)
	if err != nil {
		return nil, err
	}
	pendingPods.Set(float64(len(pending)))
	res := &Result{Pending: len(pending)}
	for _, pod := range pending {
		res.PendingPods = append(res.PendingPods, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	}
	slices.SortFunc(res.PendingPods, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	in.Nominated = p.nominated.snapshot()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		in.Unavailable = p.Offerings.Unavailable()
		in.Nodes = p.inflight.merge(in.Nodes) // launched this round, not in the cache yet
		start := p.Clock.Now()
		plan, err := scaleup.Run(in)
		planDuration.Observe(p.Clock.Since(start).Seconds())
		if err != nil {
			return res, fmt.Errorf("planning: %w", err)
		}
		res.Plan = plan
		if len(plan.NewNodes) > 0 {
			logger.Info("plan", "pending", len(pending), "newNodes", len(plan.NewNodes), "pricePerHour", plan.PricePerHour,
				"onExistingNodes", len(plan.ExistingNodePlacements), "unschedulable", len(plan.Unschedulable))
		}
		failed, err := p.launch(ctx, plan, groups, pending, res)
		if err != nil {
			return res, err
		}
		if !failed {
			break
		}
	}
	p.renominate(ctx, res.Plan, in.Nodes, pending)
	p.explain(res.Plan, pending)
	if p.Readiness != nil {
		p.Readiness.Set(readiness(res.Plan, p.virtualOwner, p.inflight.merge(in.Nodes)))
	}
	return res, nil
}

// trackReadiness records when nodes were first seen schedulable and
// returns the names of all known nodes (launched ones not in the cache
// included).
func (p *Provisioner) trackReadiness(nodes []*corev1.Node, now time.Time) map[string]bool {
	known := map[string]bool{}
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	for _, n := range p.inflight.merge(nodes) {
		known[n.Name] = true
		if _, seen := p.readySince[n.Name]; !seen && nodeutil.Schedulable(n) {
			p.readySince[n.Name] = now
		}
	}
	for name := range p.readySince {
		if !known[name] {
			delete(p.readySince, name)
		}
	}
	return known
}

// sortPods puts bound pods, and pods holding a nomination, into the plan
// input as placed, and pods that need a node as pending. It returns the
// pending pods and the set of all waiting pods, by "namespace/name".
func (p *Provisioner) sortPods(ctx context.Context, in *scaleup.Input, pods []corev1.Pod, known map[string]bool, now time.Time) (map[string]*corev1.Pod, map[string]bool) {
	pending := map[string]*corev1.Pod{}
	waiting := map[string]bool{}
	p.recheckAt = time.Time{}
	for i := range pods {
		pod := &pods[i]
		key := pod.Namespace + "/" + pod.Name
		switch {
		case podutil.IsBound(pod):
			in.Pods = append(in.Pods, pod)
		case podutil.IsUnbound(pod) && known[pod.Status.NominatedNodeName] && !p.nominationFailed(pod, now):
			// A pod nominated to a node (by berth, or by preemption) holds
			// room there: plan as if it were bound to it.
			p.noteGraceEnd(pod)
			held := pod.DeepCopy()
			held.Spec.NodeName = pod.Status.NominatedNodeName
			in.Pods = append(in.Pods, held)
			waiting[key] = true
		// A nomination to a node that no longer exists (deleted after a
		// launch timeout, say) is stale: the pod needs a node again.
		case podutil.AwaitsNode(pod):
			if berth := p.nominated.get(key); berth != "" {
				// berth had planned this pod on a node; the scheduler did
				// not put it there (or not within the grace): plan again.
				p.logNominationLost(ctx, pod, berth)
			}
			in.Pending = append(in.Pending, pod)
			pending[key] = pod
			waiting[key] = true
		}
	}
	return pending, waiting
}

// renominate points pods the plan put on nodes that are still launching at
// those nodes again. The scheduler clears a nomination whenever it retries
// the pod before the node is Ready (the node is still tainted, preemption
// finds nothing), so berth keeps restating it until the pod is bound.
func (p *Provisioner) renominate(ctx context.Context, plan *scaleup.Plan, nodes []*corev1.Node, pending map[string]*corev1.Pod) {
	if plan == nil {
		return
	}
	launching := map[string]bool{}
	for _, n := range p.inflight.merge(nodes) {
		if n.Labels[v1alpha1.LabelNodeGroup] != "" && !nodeutil.Schedulable(n) {
			launching[n.Name] = true
		}
	}
	for _, pl := range plan.ExistingNodePlacements {
		if pod := pending[pl.Pod.String()]; pod != nil && launching[pl.Node] && pod.Status.NominatedNodeName != pl.Node {
			p.nominate(ctx, pod, pl.Node)
		}
	}
}

// schedulableSince returns when a node was first seen schedulable, and
// whether it has been.
func (p *Provisioner) schedulableSince(node string) (time.Time, bool) {
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	since, ok := p.readySince[node]
	return since, ok
}

// graceEnd returns when berth stops holding a pod's room on the node berth
// nominated it to: nominationGrace after the node became schedulable. ok
// is false while the node boots, and for nominations berth did not make
// (preemption's, which the scheduler keeps).
func (p *Provisioner) graceEnd(pod *corev1.Pod) (end time.Time, ok bool) {
	node := pod.Status.NominatedNodeName
	if p.nominated.get(pod.Namespace+"/"+pod.Name) != node {
		return time.Time{}, false
	}
	since, ok := p.schedulableSince(node)
	return since.Add(nominationGrace), ok
}

// nominationFailed reports whether a pod berth nominated is still unbound
// after its grace: the scheduler placed others there, and the pod needs a
// node again.
func (p *Provisioner) nominationFailed(pod *corev1.Pod, now time.Time) bool {
	end, ok := p.graceEnd(pod)
	return ok && now.After(end)
}

// noteGraceEnd moves recheckAt forward to the end of a held pod's grace.
func (p *Provisioner) noteGraceEnd(pod *corev1.Pod) {
	if end, ok := p.graceEnd(pod); ok && (p.recheckAt.IsZero() || end.Before(p.recheckAt)) {
		p.recheckAt = end
	}
}

// forgetNominations drops nominations of pods that no longer wait, and of
// nodes that are gone (known: the node names trackReadiness returned).
func (p *Provisioner) forgetNominations(known, waiting map[string]bool) {
	p.nominated.retain(func(pod, node string) bool { return waiting[pod] && known[node] })
}

// gather reads the cluster from the cache.
func (p *Provisioner) gather(ctx context.Context) (scaleup.Input, map[string]*v1alpha1.NodeGroup, map[string]*corev1.Pod, error) {
	var in scaleup.Input
	ngs := &v1alpha1.NodeGroupList{}
	if err := p.Client.List(ctx, ngs); err != nil {
		return in, nil, nil, fmt.Errorf("listing node groups: %w", err)
	}
	groups := map[string]*v1alpha1.NodeGroup{}
	for i := range ngs.Items {
		if ngs.Items[i].DeletionTimestamp == nil {
			groups[ngs.Items[i].Name] = &ngs.Items[i]
			in.NodeGroups = append(in.NodeGroups, &ngs.Items[i])
		}
	}
	nodes := &corev1.NodeList{}
	if err := p.Client.List(ctx, nodes); err != nil {
		return in, nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	p.inflight.observe(in.Nodes)
	pods := &corev1.PodList{}
	if err := p.Client.List(ctx, pods); err != nil {
		return in, nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	now := p.Clock.Now()
	known := p.trackReadiness(in.Nodes, now)
	pending, waiting := p.sortPods(ctx, &in, pods.Items, known, now)
	p.forgetNominations(known, waiting)
	virtual, owner, err := p.virtualUnits(ctx, in.NodeGroups)
	if err != nil {
		return in, nil, nil, err
	}
	in.Pending = append(in.Pending, virtual...)
	p.virtualOwner = owner
	if err := p.gatherRest(ctx, &in); err != nil {
		return in, nil, nil, err
	}
	in.ClusterLimits = p.opts.ClusterLimits
	in.Now, in.LaunchGrace = now, p.opts.MaxProvisionTime
	return in, groups, pending, nil
}
