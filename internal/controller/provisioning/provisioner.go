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
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	"github.com/berth-dev/berth/internal/state"
)

// Name is the controller's name in logs and metrics.
const Name = "provisioning"

// Event reasons.
const (
	ReasonTriggeredScaleUp  = v1alpha1.EventReasonTriggeredScaleUp
	ReasonNotTriggerScaleUp = v1alpha1.EventReasonNotTriggerScaleUp
	ReasonLaunched          = "Launched"
	ReasonLaunchFailed      = "LaunchFailed"
	// ReasonProviderRefreshFailed is on a NodeGroup whose provider could
	// not refresh it (Cluster API: malformed autoscaler annotations, or
	// the MachineDeployment cannot be read); berth plans with its spec.
	ReasonProviderRefreshFailed = "ProviderRefreshFailed"
	// ReasonProviderListFailed is on a NodeGroup whose provider could not
	// list its instances when this replica began leading (berth launches
	// nothing in it until a listing succeeds: recoverGroups), or its
	// launching instances in a round (that round launches nothing there).
	ReasonProviderListFailed = "ProviderListFailed"
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
	// Limits cap the capacity of all nodes, their number and the nodes a
	// round launches.
	Limits scaleup.Limits
	// MaxProvisionTime is how long a launched node may take to become
	// Ready; until then the planner counts it as booting.
	MaxProvisionTime time.Duration
	// MaxVirtualPods caps the headroom units and buffer chunks of one round
	// (0: clusterread.DefaultMaxUnits).
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
	// Holds receive, after each round, the node groups berth is bringing
	// capacity to for waiting pods: scale-down starts no removal there
	// (nil: not published).
	Holds *state.Holds
	// Activity receives every launch, for NodeGroup status (nil: none).
	Activity *state.Activity
	Recorder events.EventRecorder
	Clock    clock.WithTicker
}

// Provisioner plans and launches nodes for pending pods.
type Provisioner struct {
	Deps
	opts     Options
	trigger  chan struct{}
	inflight *inflight
	// resumeFailed: suspended nodes whose resume failed, when (not offered
	// to the planner for resumeRetry).
	resumeMu     sync.Mutex
	resumeFailed map[string]time.Time
	// podEvents says what berth does for each pending pod once per change;
	// unitEvents the same for Headrooms and CapacityBuffers whose units
	// were cut.
	podEvents  *announcer[types.UID]
	unitEvents *announcer[state.Key]
	// recovered is set once recoverState has run (rounds run one at a
	// time, from Start).
	recovered bool
	// nominated remembers, per pending pod ("namespace/name"), the
	// launching node berth planned it on. The scheduler clears the pod's
	// nominatedNodeName when it retries the pod before the node is Ready;
	// berth restores it at once (see keepNomination) and still plans the
	// pod there first, so that a later round does not pack the launching
	// nodes differently and launch one more.
	nominated   *nominations
	renominateQ chan *corev1.Pod
	// unjoined are the launched instances that never registered a Node
	// whose offering was marked unavailable (once each: unregistered).
	unjoined map[string]bool
	// listed are the launching instances of each group as the last round
	// that listed them saw them.
	listed lastListed
	// schedulable is when each node was first seen schedulable.
	schedulable *schedulableSince
	// virtualOwner maps the virtual pods of the current round to the
	// readiness key of their headroom or buffer.
	virtualOwner map[types.NamespacedName]state.Key
	// base is the model of the cluster kept from round to round (rounds
	// run one at a time).
	base *snapshot.Base
	// options are the node groups' options, kept from round to round.
	options *scaleup.Options
	// informers is the manager's cache, when registered with one: rounds
	// read pods and nodes from its stores (clusterread.Parts.Informers).
	informers crcache.Informers
	// podChanges are the pods changed since the last round, from the pod
	// informer's events (nil without informers): the base reads only
	// them.
	podChanges *clusterread.PodChanges
	// recheckAt is when the earliest nomination berth holds for a pod on a
	// schedulable node runs out of grace (zero: none). Nothing else
	// happens to such a pod then, so Start plans again at that time.
	recheckAt time.Time
	// full are the node groups whose provider refused a launch at
	// maxSize, until when the rounds plan without them (fullGroups).
	full map[string]time.Time
	// unrecovered are the node groups whose instances the provider could
	// not list when this replica began leading (their error): the rounds
	// plan without them, and list them again, until a listing succeeds.
	unrecovered map[string]string
	// transient counts, per offering, the rounds in a row whose launches
	// of it failed with a transient error (maxTransientFailures); launches
	// of one round run in parallel. roundID numbers the rounds (RunOnce).
	transientMu sync.Mutex
	transient   map[scaleup.Offering]transientStreak
	roundID     uint64
	// daemons are the round's DaemonSet pods: a node launched in the
	// round keeps room for those that will run on it (syntheticNode).
	daemons []daemonset.Pod
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
		podEvents: newAnnouncer[types.UID](d.Recorder), unitEvents: newAnnouncer[state.Key](d.Recorder),
		nominated: newNominations(), renominateQ: make(chan *corev1.Pod, 1024), schedulable: newSchedulableSince(), base: snapshot.NewBase(), options: scaleup.NewOptions(),
		full: map[string]time.Time{}, unrecovered: map[string]string{}, transient: map[scaleup.Offering]transientStreak{}, unjoined: map[string]bool{}, listed: lastListed{}}
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
			select { // a shutdown does not wait for the backoff
			case <-ctx.Done():
				return nil
			case <-p.Clock.After(wait):
			}
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
	if err := p.recoverGroups(ctx); err != nil {
		return nil, fmt.Errorf("recovering state: %w", err)
	}
	p.transientMu.Lock()
	p.roundID++
	p.transientMu.Unlock()
	r, err := p.newRound(ctx)
	if err != nil {
		return nil, err
	}
	in, groups, pending := r.in, r.groups, r.pending
	observePending(pending, p.Clock.Now())
	observeNodes(p.inflight.merge(in.Nodes), p.opts.Limits.Nodes.Total) // launches the cache does not show yet too
	res := &Result{Pending: len(pending)}
	for _, pod := range pending {
		res.PendingPods = append(res.PendingPods, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	}
	slices.SortFunc(res.PendingPods, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	in.Nominated = p.nominated.snapshot()
	dss := daemonset.Pods(in.DaemonSets)
	p.daemons = dss
	resumed := 0 // standby nodes resumed: in res.Launched, but no launch
	for attempt := 0; attempt < maxAttempts; attempt++ {
		// A plan again after a failed launch launches what the round's
		// cap has left (the nodes launched count in the cluster now).
		if perRound := p.opts.Limits.Nodes.PerRound; perRound > 0 {
			if left := perRound - (len(res.Launched) - resumed); left > 0 {
				in.Limits.Nodes.PerRound = left
			} else {
				break
			}
		}
		in.Unavailable = append(append(p.Offerings.Unavailable(), p.fullOfferings(groups)...), p.unlistedOfferings(groups, r.unlisted)...)
		in.Nodes = p.inflight.merge(in.Nodes) // launched this round, not in the cache yet
		cached := in.Nodes
		var resumable map[string]bool
		in.Nodes, resumable = p.offerSuspended(cached, groups, dss) // only the planner sees them resumable
		start, builds, syncs := p.Clock.Now(), p.base.Builds, p.base.Syncs
		plan, err := scaleup.Run(in)
		in.Nodes = cached
		planDuration.Observe(p.Clock.Since(start).Seconds())
		snapshotBuilds.WithLabelValues("scratch").Add(float64(p.base.Builds - builds))
		snapshotBuilds.WithLabelValues("incremental").Add(float64(p.base.Syncs - syncs))
		if err != nil {
			return res, fmt.Errorf("planning: %w", err)
		}
		res.Plan = plan
		if len(plan.NewNodes) > 0 {
			logger.Info("plan", "pending", len(pending), "newNodes", len(plan.NewNodes), "pricePerHour", plan.PricePerHour,
				"onExistingNodes", len(plan.ExistingNodePlacements), "unschedulable", len(plan.Unschedulable))
		}
		before := len(res.Launched)
		p.resumePlaced(ctx, plan, resumable, groups, in.Nodes, dss, pending, res)
		resumed += len(res.Launched) - before
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
	p.publishHolds(r.waiting, p.inflight.merge(in.Nodes))
	if p.Readiness != nil {
		p.Readiness.Set(readiness(res.Plan, p.virtualOwner, p.inflight.merge(in.Nodes)))
	}
	return res, nil
}
