// Package sim replays a trace of pods through berth's own brain on a
// virtual clock: the scale-up planner (internal/planner/scaleup) decides
// what to launch, the scale-down planner (internal/planner/scaledown) what
// to remove, headroom is resolved by internal/headroom, and a scheduler
// model built from berth's filters (internal/simulator/predicates, scored
// least-allocated as kube-scheduler's default) binds pods. Nothing sleeps
// or reads the wall clock: a day runs as fast as the planners allow.
//
// What is the controller's code and what is modelled here: the planners,
// the filters, headroom resolution and the drain rules are the same code;
// the rounds' bookkeeping (batching, nominations and their grace,
// consolidateAfter, the budget, drains by eviction, launch delays) is
// modelled here after the controllers (internal/controller/provisioning
// and disruption), and checked against the live system by
// test/e2e/simulate_test.go.
package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/trace"
)

// Config is what a simulation runs with.
type Config struct {
	// Name names the policy in the report.
	Name       string
	NodeGroups []*v1alpha1.NodeGroup
	Headrooms  []*v1alpha1.Headroom
	DaemonSets []*appsv1.DaemonSet
	// LaunchDelay is the boot time of a node of a group; nil or a
	// negative duration: the group's kwok launchDelay, else
	// DefaultLaunchDelay.
	LaunchDelay func(group string, rng *rand.Rand) time.Duration
	// BatchIdle, BatchMax and Resync pace provisioning rounds as the
	// controller's flags do; ScaleDownInterval the scale-down rounds.
	BatchIdle, BatchMax, Resync, ScaleDownInterval time.Duration
	// Limits as for the controller (zero: the planner's default
	// resources, no node cap).
	Limits scaleup.Limits
	// Sample is the period of the time series (default 60 s).
	Sample time.Duration
	// Seed seeds launch delays drawn from distributions.
	Seed uint64
	// Histories are demand histories of Headrooms with a target, by
	// name, learned before (Result.Histories of a run on another trace):
	// the run starts knowing them instead of learning from nothing.
	Histories map[string]*demand.History
	// BurstHistories are the burst-window histories of Headrooms with a
	// target and spec.standby, learned before (Result.BurstHistories).
	BurstHistories map[string]*demand.History
	// Shapes are the shapes Headrooms with a target learned apart
	// (spec.target.shapes Learned), learned before (Result.Shapes).
	Shapes map[string]*demand.Saved
	// OnBound, when set, is told each pod (not placeholders, not the pods
	// running when the trace began) as it binds:
	// its key, when it was created and when it bound, since the start.
	OnBound func(pod string, created, bound time.Duration)
	// Log, when set, is told every launch, readiness, binding,
	// preemption, drain, eviction and removal (berth simulate -v).
	Log func(at time.Duration, format string, args ...any)
}

// Defaults of Config.
const (
	DefaultLaunchDelay       = 60 * time.Second
	DefaultBatchIdle         = time.Second
	DefaultBatchMax          = 10 * time.Second
	DefaultResync            = 30 * time.Second
	DefaultScaleDownInterval = 10 * time.Second
	nominationGrace          = 5 * time.Second
	launchGrace              = scaleup.DefaultLaunchGrace
)

func (c *Config) defaults() {
	if c.BatchIdle <= 0 {
		c.BatchIdle = DefaultBatchIdle
	}
	if c.BatchMax <= 0 {
		c.BatchMax = DefaultBatchMax
	}
	if c.Resync <= 0 {
		c.Resync = DefaultResync
	}
	if c.ScaleDownInterval <= 0 {
		c.ScaleDownInterval = DefaultScaleDownInterval
	}
	if c.Sample <= 0 {
		c.Sample = time.Minute
	}
}

// event kinds, in the order they run at the same instant.
type kind int

const (
	evTrace kind = iota
	evNodeReady
	evSchedule
	evProvision
	evScaleDown
	evSample
)

type event struct {
	at   time.Time
	kind kind
	seq  int
	node string
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].kind != q[j].kind {
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any     { old := *q; e := old[len(old)-1]; *q = old[:len(old)-1]; return e }
func (q *queue) add(e *event) { heap.Push(q, e) }
func (q *queue) next() *event { return heap.Pop(q).(*event) }
func (q queue) peek() *event  { return q[0] }
func (q queue) empty() bool   { return len(q) == 0 }

// Engine is one simulation.
type Engine struct {
	cfg    Config
	now    time.Time
	start  time.Time
	groups map[string]*v1alpha1.NodeGroup
	nodes  map[string]*node
	pods   map[string]*pod
	// order holds the pods in the order they were added, the deleted
	// ones (gone) until the next podList: rounds read pods in this order,
	// as a map's order would differ from run to run.
	order []*pod
	gone  int
	// alias maps a trace pod's key to its current incarnation's key.
	alias    map[string]string
	pending  []*pod
	q        queue
	seq      int
	rng      *rand.Rand
	sched    *scheduler
	metrics  *metrics
	headroom *headroomState
	learner  *learner
	// provisioning and scale-down bookkeeping
	batchStart     time.Time
	provisionAt    time.Time
	removableSince scaledown.Countdown
	// warming: the round that makes the cluster the trace began with.
	warming         bool
	nodeSeq, podSeq int
	// dirty: something changed since the last scale-down plan, lastPlan;
	// a plan made on the same cluster is the same unless it depends on
	// the time (timeDependent: budgets with schedules, expiry).
	dirty         bool
	lastPlan      *scaledown.Plan
	timeDependent bool
	err           error
}

// Run replays the trace through the configuration and returns the result.
func Run(cfg Config, r *trace.Reader) (*Result, error) {
	return run(context.Background(), cfg, r, nil)
}

// RunContext is Run that stops with ctx's error once ctx ends (a user's
// Ctrl-C).
func RunContext(ctx context.Context, cfg Config, r *trace.Reader) (*Result, error) {
	return run(ctx, cfg, r, nil)
}

func run(ctx context.Context, cfg Config, r *trace.Reader, out **Engine) (*Result, error) {
	cfg.defaults()
	e := &Engine{cfg: cfg, start: r.Header.Start, now: r.Header.Start, groups: map[string]*v1alpha1.NodeGroup{}, nodes: map[string]*node{},
		pods: map[string]*pod{}, alias: map[string]string{}, removableSince: scaledown.Countdown{},
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed+1))}
	// Groups read from files have no UID: the nodes' owner mark needs one.
	groups := make([]*v1alpha1.NodeGroup, 0, len(cfg.NodeGroups))
	for _, g := range cfg.NodeGroups {
		if g.UID == "" {
			g = g.DeepCopy()
			g.UID = "sim-" + typesUID("", g.Name)
		}
		groups = append(groups, g)
		d := g.Spec.Disruption
		e.timeDependent = e.timeDependent || d.ExpireAfter != nil || d.Window != nil || slices.ContainsFunc(d.Budgets, func(b v1alpha1.DisruptionBudget) bool { return b.Schedule != "" })
		e.groups[g.Name] = g
	}
	e.cfg.NodeGroups = groups
	if out != nil {
		*out = e
	}
	e.metrics = newMetrics(cfg.Name, e.start)
	e.sched = newScheduler(e)
	e.headroom = newHeadroomState(e)
	e.learner = newLearner(e)
	next, err := r.Next()
	warm := false
	for ; err == nil && next.Running; next, err = r.Next() {
		e.replay(next)
		warm = true
	}
	if warm {
		e.warmStart()
	}
	e.provisionSoon(e.start)
	e.schedule(e.start.Add(cfg.ScaleDownInterval), evScaleDown, "")
	e.schedule(e.start, evSample, "")
	for step := 0; ; step++ {
		if step%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if errors.Is(err, io.EOF) {
			break // the simulation ends with the trace's last event
		}
		at := e.eventTime(next, err)
		// At one instant the trace's event comes first: the world changes,
		// then the controllers and the scheduler react.
		if !e.q.empty() && e.q.peek().at.Before(at) {
			ev := e.q.next()
			e.now = ev.at
			e.handle(ev)
		} else if err == nil {
			e.now = at
			e.replay(next)
			next, err = r.Next()
		} else {
			break
		}
		if e.err != nil {
			return nil, e.err
		}
	}
	return e.metrics.result(e.now, e), nil
}

func (e *Engine) eventTime(ev *trace.Event, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return e.start.Add(time.Duration(ev.At * float64(time.Second)))
}

func (e *Engine) schedule(at time.Time, k kind, node string) {
	e.seq++
	e.q.add(&event{at: at, kind: k, seq: e.seq, node: node})
}

func (e *Engine) handle(ev *event) {
	switch ev.kind {
	case evNodeReady:
		e.nodeReady(ev.node)
	case evSchedule:
		e.sched.pass()
	case evProvision:
		e.provision()
	case evScaleDown:
		e.scaleDown()
		e.schedule(e.now.Add(e.cfg.ScaleDownInterval), evScaleDown, "")
	case evSample:
		e.metrics.sample(e.now, e)
		e.schedule(e.now.Add(e.cfg.Sample), evSample, "")
	}
}

// warmStart makes the cluster a trace that begins with running pods
// began with: those pods, and the headroom a controller that had been
// running would keep, planned by the scale-up planner as one round and
// placed on nodes Ready at once, before the clock starts. (A trace
// without running pods begins with an empty cluster: its headroom is
// launched at the start and boots.)
func (e *Engine) warmStart() {
	// Placeholders are made by the round's headroom resolution, after it
	// lists the pods to plan: made first, they are planned with the rest.
	e.headroom.virtual()
	for _, p := range e.pending {
		if p.placeholder != "" {
			p.tried = true
		}
	}
	e.warming = true
	e.provisionAt = e.now
	e.provision()
	e.warming = false
	var names []string
	for name, n := range e.nodes {
		if n.atStart {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		e.nodeReady(name)
	}
	e.sched.pass()
	// A running pod the cluster could not hold (no group of the policy
	// fits it) waits as any pod, from the start.
	for _, p := range e.pending {
		if p.running {
			p.running, p.needed = false, true
			e.metrics.running--
			e.metrics.pods++
		}
	}
}

// replay applies one trace event.
func (e *Engine) replay(ev *trace.Event) {
	switch ev.Op {
	case trace.OpCreate:
		p := ev.Pod
		obj := &corev1.Pod{Spec: *p.Spec.DeepCopy()}
		podutil.ApplyDefaults(&obj.Spec) // as the API server admits it: a container's limits alone are its requests
		obj.Namespace, obj.Name, obj.Labels = p.Namespace, p.Name, p.Labels
		obj.UID = "sim-" + typesUID(p.Namespace, p.Name)
		if p.Workload != "" {
			obj.OwnerReferences = ownerRef(p.Workload)
		}
		obj.Status.Phase = corev1.PodPending
		e.addPod(&pod{obj: obj, created: e.now, trace: ev.Key(), running: ev.Running, tried: ev.Running})
	case trace.OpDelete:
		key := ev.Key()
		if cur, ok := e.alias[key]; ok {
			key = cur
		}
		if p := e.pods[key]; p != nil {
			e.deletePod(p)
			delete(e.alias, ev.Key())
		}
	}
	e.dirty = true
}

func (e *Engine) addPod(p *pod) {
	e.pods[p.key()] = p
	e.order = append(e.order, p)
	e.alias[p.trace] = p.key()
	e.pending = append(e.pending, p)
	e.metrics.created(p)
	e.sched.kick()
}

func (e *Engine) deletePod(p *pod) {
	delete(e.pods, p.key())
	p.deleted = true
	e.gone++
	if p.isBound() {
		if n := e.nodes[p.obj.Spec.NodeName]; n != nil {
			e.learner.left(p, n.group)
		}
		e.sched.unbind(p)
		e.sched.kickAll()
		if len(e.cfg.Headrooms) > 0 {
			e.needCapacity() // headroom may be back, as the controller's pod-deleted trigger
		}
	} else {
		e.dropPending(p)
		e.metrics.deletedUnbound(p, e.now)
		e.learner.judgeUnbound(p, e.now.Sub(p.created))
	}
	e.dirty = true
}

func (e *Engine) dropPending(p *pod) {
	for i, q := range e.pending {
		if q == p {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			return
		}
	}
}

func (e *Engine) logf(format string, args ...any) {
	if e.cfg.Log != nil {
		e.cfg.Log(e.now.Sub(e.start), format, args...)
	}
}

func (e *Engine) fail(err error) {
	if e.err == nil {
		e.err = fmt.Errorf("at %s: %w", e.now.Sub(e.start), err)
	}
}

// podList returns the pods in the order they were added.
func (e *Engine) podList() []*pod {
	if e.gone > 0 {
		e.order = slices.DeleteFunc(e.order, func(p *pod) bool { return p.deleted })
		e.gone = 0
	}
	return e.order
}
