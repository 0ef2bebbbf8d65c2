// Package disruption is the scale-down controller. Every round it plans
// with the pure scale-down planner (internal/planner/scaledown) which of
// berth's nodes can go, waits until a node has been removable for its
// group's consolidateAfter, taints it berth.dev/disrupted:NoSchedule (all
// nodes of a round before any eviction), evicts its pods through the
// Eviction API (PodDisruptionBudgets decide the pace; a refusal is retried,
// never forced), and deletes the node through the cloud provider once only
// pods that go with it are left. A drain that takes longer than the
// group's drainTimeout is given up: the node is untainted and stays.
//
// Every destructive step re-proves itself on fresh state: before each
// round of evictions and right before the deletion, the node's pods are
// read from the API server (not the cache) and the drain rules run on
// each; a pod that now blocks (a bare pod bound after the decision, say)
// gives the removal up, and pods that were not there at the decision make
// the removal be simulated again. One drain's failure never stops the
// others.
//
// Everything a drain needs survives a restart on the node itself (the
// taint and the berth.dev/disruption-started annotation): a new leader
// checks each tainted node again and either finishes its drain or
// untaints it. A removal the provider holds half-done (a Cluster API
// Machine marked, its replicas not lowered) is undone when berth no longer
// drains its node.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	"github.com/berth-dev/berth/internal/state"
)

// Name is the controller's name.
const Name = "disruption"

// Event reasons, on the node.
const (
	ReasonScaleDownBlocked = "ScaleDownBlocked"
	ReasonDisrupting       = "Disrupting"
	ReasonDrainTimedOut    = "DrainTimedOut"
	ReasonDrainStopped     = "DrainStopped"
	ReasonRemoved          = "Removed"
	// ReasonProviderUnknown: the node's provider has no instance for it.
	ReasonProviderUnknown = "ProviderUnknown"
	// ReasonRemovalCancelled: a removal the provider held half-done for a
	// node berth no longer drains was undone.
	ReasonRemovalCancelled = "RemovalCancelled"
	// ReasonRemovalRefused: the provider refused to remove a drained node
	// (an API error, a Cluster API object that cannot be scaled now).
	ReasonRemovalRefused = "RemovalRefused"
	// ReasonRemovalLingers: the provider accepted removing the node longer
	// than the max provision time ago, and the node is still there.
	ReasonRemovalLingers = "RemovalLingers"
)

// DeleteRetryInterval is how often the provider is asked again to remove
// a drained node it accepted to remove that is still there: a Cluster API
// MachineSet that had not yet made a Machine its replicas asked for, or
// one deleting another Machine, may not have deleted berth's.
const DeleteRetryInterval = time.Minute

// DefaultMaxRemovalsPerRound caps how many drains one round may start,
// over all node groups and reasons but an interruption (each group's
// budget applies too).
const DefaultMaxRemovalsPerRound = 10

// Options tune the controller.
type Options struct {
	// Interval between rounds.
	Interval time.Duration
	// MaxRemovalsPerRound (0: DefaultMaxRemovalsPerRound).
	MaxRemovalsPerRound int
	// Limits as for scale-up (a replacement is planned within them).
	Limits scaleup.Limits
	// MaxProvisionTime bounds how long a replacement whose Node has not
	// registered is awaited while its provider still launches it (0:
	// DefaultMaxProvisionTime).
	MaxProvisionTime time.Duration
	// DeletionDelayTimeout is how long a drained node's removal waits
	// for the annotations of v1alpha1.AnnotationPrefixDelayDeletion on it
	// to be removed, as Cluster Autoscaler's --node-deletion-delay-timeout
	// (0: not waited for).
	DeletionDelayTimeout time.Duration
}

// DefaultDeletionDelayTimeout is the controller's default
// --node-deletion-delay-timeout, Cluster Autoscaler's.
const DefaultDeletionDelayTimeout = 2 * time.Minute

// DefaultMaxProvisionTime is the controller's default --max-provision-time.
const DefaultMaxProvisionTime = lifecycle.DefaultMaxProvisionTime

// Deps are what the controller works with.
type Deps struct {
	Client client.Client
	// APIReader reads past the cache, right before irreversible steps
	// (nil: Client).
	APIReader client.Reader
	Cloud     cloudprovider.CloudProvider
	Recorder  events.EventRecorder
	Clock     clock.WithTicker
	// Holds are the node groups where the provisioner is bringing
	// capacity for a waiting pod (nil: none).
	Holds Holds
	// Offerings are the offerings to avoid for a while, shared with
	// scale-up: replacements are planned without them, and they are told
	// of interrupted offerings and of replacements that failed to launch
	// (nil: none avoided, none told).
	Offerings Unavailable
	// Activity receives every removal and replacement launch, for
	// NodeGroup status (nil: none).
	Activity *state.Activity
}

// Holds tells which node groups hold their removals, and whether the
// provisioner has published them yet (until then every group is held).
type Holds interface {
	All() map[string]state.Hold
	Published() bool
}

// Controller removes nodes that are no longer needed.
type Controller struct {
	Deps
	opts Options
	// removableSince is when each node was first planned removable in a
	// row of rounds; memory only: after a restart a node waits its
	// consolidateAfter again (the safe direction).
	removableSince scaledown.Countdown
	// accounted holds, per draining node this replica started or
	// re-checked, the pods that had to move then: a pod that is not among
	// them makes the removal be simulated again.
	accounted map[string]map[types.UID]bool
	// givenUp is when this replica last gave up each node's drain.
	givenUp map[string]time.Time
	// emptied is when each draining node was first found with no pod
	// left to evict or shutting down: its removal has the drain timeout
	// from then (pods that left after the timeout); criticalTurn when it
	// was first found with only critical pods left to evict (they go
	// last, advance): they have the drain timeout from then;
	// volumesWaited when berth stopped waiting for an emptied node's
	// volumes to detach (detachWait): its removal has the drain timeout
	// from then. Each is written on the node (drainClock) and kept here
	// until the cache shows it.
	emptied, criticalTurn, volumesWaited map[string]time.Time
	// deletionDelayed is when an emptied node's removal began to wait
	// for another controller's delay-deletion annotations (deletionDelay),
	// written on the node too and kept here until the cache shows it.
	deletionDelayed map[string]time.Time
	// deleted holds when this replica last asked the cloud provider to
	// remove each node that still exists: a removal the provider accepted
	// (AnnotationRemovalAccepted on the node, so that a restart knows it)
	// is counted and announced once, and asked again (the providers'
	// Delete is safe to repeat) every DeleteRetryInterval, in case the
	// provider accepted it but did not act on it.
	deleted map[string]time.Time
	// lastReplacement is when this replica last launched a replacement.
	lastReplacement time.Time
	// marks are what this replica wrote on nodes it launched nodes for,
	// until the informer cache shows it (see mark).
	marks map[string]mark
	// unseen are the taints this replica wrote or took off that the cache
	// may not show yet (overlayOwnWrites).
	unseen map[string]unseenWrite
	// lastBlocked is the last ScaleDownBlocked message per node, lastWarned
	// the last warning about a drain per node, and lastWindow per node
	// group with an unreadable window.
	lastBlocked, lastWarned, lastWindow map[string]string
	// base is the model of the cluster kept from round to round (rounds
	// run one at a time, from Start); whatIf the one the plans'
	// what-ifs keep (scaledown.Input.WhatIf).
	base, whatIf *snapshot.Base
	// informers is the manager's cache, when registered with one: rounds
	// read pods from its stores (clusterread.Parts.Informers).
	informers crcache.Informers
}

// New returns a controller.
func New(d Deps, o Options) *Controller {
	if o.MaxRemovalsPerRound <= 0 {
		o.MaxRemovalsPerRound = DefaultMaxRemovalsPerRound
	}
	if d.APIReader == nil {
		d.APIReader = d.Client
	}
	return &Controller{Deps: d, opts: o, removableSince: scaledown.Countdown{}, accounted: map[string]map[types.UID]bool{},
		deleted: map[string]time.Time{}, marks: map[string]mark{}, unseen: map[string]unseenWrite{}, givenUp: map[string]time.Time{}, emptied: map[string]time.Time{}, criticalTurn: map[string]time.Time{}, volumesWaited: map[string]time.Time{}, deletionDelayed: map[string]time.Time{}, lastBlocked: map[string]string{}, lastWarned: map[string]string{}, lastWindow: map[string]string{},
		base: snapshot.NewBase(), whatIf: snapshot.NewBase()}
}

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=pods,verbs=delete

// Register adds the controller to the manager; it runs on the leader.
func (c *Controller) Register(mgr ctrl.Manager) error {
	c.informers = mgr.GetCache() // rounds read pods from its stores
	return mgr.Add(c)
}

// NeedLeaderElection returns true: only the leader removes nodes.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs rounds every Interval until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName(Name)
	ctx = log.IntoContext(ctx, logger)
	tick := c.Clock.NewTicker(c.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		if err := c.safeRound(ctx); err != nil {
			logger.Error(err, "scale-down round failed; retrying next round")
			roundErrors.Inc()
		}
	}
}

func (c *Controller) safeRound(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("scale-down round panicked: %v\n%s", r, debug.Stack())
		}
	}()
	_, err = c.RunOnce(ctx)
	return err
}

// Result is what one round did.
type Result struct {
	Plan *scaledown.Plan
	// Started are the nodes tainted this round; Removed the nodes deleted;
	// GivenUp the drains stopped; Replacements the nodes launched to
	// replace others.
	Started, Removed, GivenUp, Replacements []string
	// paced counts the drains started this round that count against
	// MaxRemovalsPerRound: all but an interruption's (the cloud takes the
	// node whatever berth does).
	paced int
}

// started records a drain started this round for reason.
func (r *Result) started(node string, reason v1alpha1.DisruptionReason) {
	r.Started = append(r.Started, node)
	if reason != v1alpha1.ReasonInterrupted {
		r.paced++
	}
}

// paceFull reports whether this round started as many drains as one
// round may (MaxRemovalsPerRound, over all groups and reasons but an
// interruption): a drain due now then starts in a later round.
func (c *Controller) paceFull(res *Result) bool { return res.paced >= c.opts.MaxRemovalsPerRound }

// RunOnce runs one round: stale provider removals are undone, drains in
// progress advance, then new removals are planned and started. An error of
// one node's step is reported and the round goes on with the others.
func (c *Controller) RunOnce(ctx context.Context) (*Result, error) {
	w, err := c.gather(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	c.overlayOwnWrites(ctx, w)
	for name := range c.deleted {
		if w.byName[name] == nil {
			delete(c.deleted, name)
		}
	}
	for _, m := range []map[string]time.Time{c.emptied, c.criticalTurn, c.volumesWaited, c.deletionDelayed} {
		for name := range m {
			if n := w.byName[name]; n == nil || !nodeutil.Disrupted(n) {
				delete(m, name)
			}
		}
	}
	for name, at := range c.givenUp {
		if w.byName[name] == nil || c.Clock.Since(at) > scaledown.GiveUpCooldown {
			delete(c.givenUp, name)
		}
	}
	errs := c.ensureMarks(ctx, w)
	errs = append(errs, c.cancelStaleRemovals(ctx, w)...)
	errs = append(errs, c.syncInterruptions(ctx, w)...)
	for _, n := range w.nodes {
		var err error
		switch {
		case nodeutil.Disrupted(n):
			err = c.advance(ctx, w, n, res)
		case n.Annotations[v1alpha1.AnnotationReplacedBy] != "":
			err = c.awaitReplacement(ctx, w, n, res)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
		}
	}
	w.input.Cooling = c.cooling(w) // with the drains given up just now
	w.input.Since = c.removableSince
	plan, err := scaledown.Run(w.input)
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("planning scale-down: %w", err))...)
	}
	res.Plan = plan
	c.report(w, plan)
	c.conditions(ctx, w, plan)
	for _, d := range plan.Disruptions {
		if err := c.disrupt(ctx, w, d, res); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", d.Node, err))
		}
	}
	for _, r := range c.due(w, plan) {
		if _, ok := c.marks[r.Node]; ok {
			continue // launched for: its marks are not confirmed yet (ensureMarks)
		}
		if c.paceFull(res) {
			break
		}
		if err := c.start(ctx, w, w.byName[r.Node], reasonOf(r.Reason), why(r.Reason)); err != nil {
			errs = append(errs, err)
			continue
		}
		res.started(r.Node, reasonOf(r.Reason))
	}
	for _, r := range plan.Replace {
		if c.replacing(w) {
			break // one replacement at a time
		}
		if c.dueAll(w, r.Nodes) {
			if err := c.launchReplacement(ctx, w, r, res); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return res, errors.Join(errs...)
}

// owns reports whether the node is the group's: it carries the owner mark
// of this group (its UID), not of one deleted earlier under the same name.
func owns(g *v1alpha1.NodeGroup, n *corev1.Node) bool {
	return g != nil && n.Annotations[v1alpha1.AnnotationLaunchedBy] == string(g.UID)
}
