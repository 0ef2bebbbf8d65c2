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
// Everything a drain needs survives a restart on the node itself (the
// taint and the berth.dev/disruption-started annotation): a new leader
// checks each tainted node again and either finishes its drain or
// untaints it.
package disruption

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/podutil"
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
)

// DefaultMaxRemovalsPerRound caps how many drains one round may start,
// over all node groups (each group's budget applies too).
const DefaultMaxRemovalsPerRound = 10

// Options tune the controller.
type Options struct {
	// Interval between rounds.
	Interval time.Duration
	// MaxRemovalsPerRound (0: DefaultMaxRemovalsPerRound).
	MaxRemovalsPerRound int
	// ClusterLimits as for scale-up.
	ClusterLimits corev1.ResourceList
}

// Deps are what the controller works with.
type Deps struct {
	Client   client.Client
	Cloud    cloudprovider.CloudProvider
	Recorder events.EventRecorder
	Clock    clock.WithTicker
}

// Controller removes nodes that are no longer needed.
type Controller struct {
	Deps
	opts Options
	// removableSince is when each node was first planned removable in a
	// row of rounds; memory only: after a restart a node waits its
	// consolidateAfter again (the safe direction).
	removableSince map[string]time.Time
	// checked holds the draining nodes this replica started or re-checked.
	checked map[string]bool
	// deleted holds the nodes whose removal the cloud provider accepted
	// that still exist: a Cluster API Machine takes a while to go, and
	// asking again every round would count and announce it again.
	deleted map[string]bool
	// lastReplacement is when this replica last launched a replacement.
	lastReplacement time.Time
	// lastBlocked is the last ScaleDownBlocked message per node, and
	// lastWindow per node group with an unreadable window.
	lastBlocked, lastWindow map[string]string
}

// New returns a controller.
func New(d Deps, o Options) *Controller {
	if o.MaxRemovalsPerRound <= 0 {
		o.MaxRemovalsPerRound = DefaultMaxRemovalsPerRound
	}
	return &Controller{Deps: d, opts: o, removableSince: map[string]time.Time{}, checked: map[string]bool{}, deleted: map[string]bool{}, lastBlocked: map[string]string{}, lastWindow: map[string]string{}}
}

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=pods,verbs=delete

// Register adds the controller to the manager; it runs on the leader.
func (c *Controller) Register(mgr ctrl.Manager) error { return mgr.Add(c) }

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
}

// RunOnce runs one round: drains in progress advance, then new removals
// are planned and started.
func (c *Controller) RunOnce(ctx context.Context) (*Result, error) {
	w, err := c.gather(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	for name := range c.deleted {
		if w.byName[name] == nil {
			delete(c.deleted, name)
		}
	}
	for _, n := range w.nodes {
		switch {
		case isDisrupted(n):
			if err := c.advance(ctx, w, n, res); err != nil {
				return res, err
			}
		case n.Annotations[v1alpha1.AnnotationReplacedBy] != "":
			if err := c.awaitReplacement(ctx, w, n, res); err != nil {
				return res, err
			}
		}
	}
	if w.awaiting > 0 {
		// Pods wait for capacity: removing capacity now would fight the
		// scale-up. Drains in progress go on; nothing new starts.
		log.FromContext(ctx).V(1).Info("pods await a node; no new scale-down this round", "pods", w.awaiting)
		return res, nil
	}
	plan, err := scaledown.Run(w.input)
	if err != nil {
		return res, fmt.Errorf("planning scale-down: %w", err)
	}
	res.Plan = plan
	c.report(w, plan)
	for _, name := range c.due(w, plan) {
		if err := c.start(ctx, w.byName[name]); err != nil {
			return res, err
		}
		res.Started = append(res.Started, name)
	}
	for _, r := range plan.Replace {
		if c.replacing(w) {
			break // one replacement at a time
		}
		if c.dueAll(w, r.Nodes) {
			if err := c.launchReplacement(ctx, w, r, res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// isDisrupted reports whether the node carries berth's disrupted taint.
func isDisrupted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintDisrupted {
			return true
		}
	}
	return false
}

// mustMove reports whether a pod on a node being drained must be evicted
// before the node is deleted: everything but DaemonSet, mirror and finished
// pods (placeholders are deleted instead, see advance).
func mustMove(p *corev1.Pod) bool {
	return !podutil.IsOwnedByDaemonSet(p) && !podutil.IsMirror(p) && !podutil.IsTerminal(p)
}
