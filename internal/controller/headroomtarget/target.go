// Package headroomtarget learns, for every Headroom with a target, how
// much capacity the pods in its scope ask for within one node-launch time
// (internal/headroom/demand), measures their wait for capacity (a
// histogram metric per Headroom and node group, and the last hour and day
// for status), keeps the history in a ConfigMap so that a restart does
// not forget it, and publishes the estimates (internal/state.Targets) for
// the headroom controller, which sizes the Headroom from them.
package headroomtarget

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/state"
)

// Name is the controller's name.
const Name = "headroom-target"

// Periods of the learner.
const (
	// tick closes windows, estimates and publishes.
	tick = 10 * time.Second
	// saveEvery writes a changed history to its ConfigMap.
	saveEvery = 5 * time.Minute
	// maxTracked bounds the pending pods remembered (waited for capacity,
	// gates removed): a cluster with more pending pods loses the oldest
	// waits' precision, not memory.
	maxTracked = 200_000
)

// ConfigMapPrefix names a Headroom's history: berth-demand-<name> in
// berth-system, owned by the Headroom (deleted with it).
const ConfigMapPrefix = "berth-demand-"

// ConfigMap keys of the histories: of launch windows, and of burst
// windows (a Headroom that may keep standby units).
const (
	historyKey = "history.json"
	burstKey   = "burst.json"
	// shapesKey holds the histories of the shapes learned apart (pods
	// larger than a unit).
	shapesKey = "shapes.json"
)

// followBurst returns the burst recorder for the window: rec while it
// counts in that window and unit, else one on the loaded history (when it
// matches) or a new one; nil when no burst window is needed.
func followBurst(rec *demand.Recorder, loaded *demand.History, window time.Duration, shape demand.Shape, span time.Duration, now time.Time) *demand.Recorder {
	switch {
	case window <= 0 || len(shape) == 0:
		return nil
	case rec != nil && rec.H.Matches(window, shape):
		return rec
	case rec == nil && loaded != nil && loaded.Matches(window, shape):
		return demand.NewRecorder(loaded, now)
	}
	return demand.NewRecorder(demand.NewHistory(window, shape, span, now), now)
}

// Learner is the controller.
type Learner struct {
	Client    client.Client
	APIReader client.Reader
	Targets   *state.Targets
	Clock     clock.PassiveClock
	// MinHistory is how long a history must have been watched before its
	// estimate replaces the fallback units (default demand.MinHistory).
	MinHistory time.Duration

	mu      sync.Mutex
	tracked map[string]*tracked
	// pending pods: when each became schedulable (created, or its gates
	// removed) and whether it waited for capacity.
	pending map[types.NamespacedName]pendingPod
}

type pendingPod struct {
	since time.Time
	// waited: a scheduling attempt found no room, or the pod was
	// nominated to a node (launched for it, or freed by preemption).
	waited bool
}

// tracked is one Headroom with a target.
type tracked struct {
	h        *v1alpha1.Headroom
	groups   map[string]bool // nil: all
	selector labels.Selector
	shape    demand.Shape
	rec      *demand.Recorder
	// burst counts the demand in the first BurstWindow of bursts, for a
	// Headroom that may keep standby units (nil otherwise).
	burst *demand.Recorder
	// shapes learns the pods larger than a unit apart, by their shape
	// (spec.target.shapes Learned; nil otherwise).
	shapes *demand.Shapes
	waits  demand.Waits
	// largest is the most units one arriving pod needed, per hour.
	largest largest
	changed bool
	saved   time.Time
}

// largest keeps, for each of the last 24 hours, the most units of the
// Headroom's shape that one arriving pod needed (held in memory only: a
// restart starts it again).
type largest [24]struct{ hour, units int64 }

func (l *largest) observe(now time.Time, units int64) {
	h := now.Unix() / 3600
	e := &l[h%24]
	if e.hour != h {
		e.hour, e.units = h, 0
	}
	e.units = max(e.units, units)
}

// over is the most units one pod needed in the last day.
func (l *largest) over(now time.Time) int64 {
	h, most := now.Unix()/3600, int64(0)
	for _, e := range l {
		if e.hour <= h && h-e.hour < 24 {
			most = max(most, e.units)
		}
	}
	return most
}

// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=headrooms;nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=configmaps,verbs=get;create;update

// Register adds the learner to the manager: pod events feed it, a ticker
// closes windows and publishes.
func (l *Learner) Register(mgr manager.Manager) error {
	l.tracked = map[string]*tracked{}
	l.pending = map[types.NamespacedName]pendingPod{}
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting the pod informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if p, ok := o.(*corev1.Pod); ok && !initial {
				l.podSeen(nil, p)
			}
		},
		UpdateFunc: func(old, o any) {
			op, ok1 := old.(*corev1.Pod)
			np, ok2 := o.(*corev1.Pod)
			if ok1 && ok2 {
				l.podSeen(op, np)
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				l.podGone(p)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	return mgr.Add(l)
}

// NeedLeaderElection returns true: the leader learns and persists.
func (l *Learner) NeedLeaderElection() bool { return true }

// Start runs the ticker until ctx ends, then saves what changed.
func (l *Learner) Start(ctx context.Context) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := l.round(ctx); err != nil {
			log.FromContext(ctx).Error(err, "headroom target round")
		}
		select {
		case <-ctx.Done():
			save, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			l.saveAll(save, true)
			return nil
		case <-t.C:
		}
	}
}

// podSeen follows a pod from pending to bound: when it became schedulable,
// whether it waited for capacity, and at binding its wait and
// its arrival in the demand of the Headrooms whose scope it landed in.
func (l *Learner) podSeen(old, p *corev1.Pod) {
	key := client.ObjectKeyFromObject(p)
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tracked) == 0 {
		return
	}
	if podutil.IsUnbound(p) {
		pp, ok := l.pending[key]
		if !ok {
			if len(l.pending) >= maxTracked {
				return
			}
			pp = pendingPod{since: p.CreationTimestamp.Time}
		}
		if old != nil && len(old.Spec.SchedulingGates) > 0 && len(p.Spec.SchedulingGates) == 0 {
			pp.since = now // schedulable from now on
		}
		// A burst's pod may be nominated to the node launched for it
		// before the scheduler ever tries it.
		if podutil.FailedToSchedule(p) || p.Status.NominatedNodeName != "" {
			pp.waited = true
		}
		l.pending[key] = pp
		return
	}
	if old != nil && old.Spec.NodeName != "" && !podutil.IsTerminal(old) && podutil.IsTerminal(p) {
		// A bound pod that finished (a Job's) leaves the demand now: it
		// holds no capacity any more, and podGone skips it once finished.
		l.left(p, now)
		return
	}
	if old == nil || old.Spec.NodeName != "" || p.Spec.NodeName == "" || podutil.IsTerminal(p) {
		return
	}
	pp, known := l.pending[key]
	delete(l.pending, key)
	if !known {
		pp = pendingPod{since: p.CreationTimestamp.Time}
	}
	wait := time.Duration(0)
	if pp.waited {
		wait = max(0, now.Sub(pp.since))
	}
	group := l.groupOf(p.Spec.NodeName)
	req := demand.RequestsOf(resource.PodRequests(p, resource.PodResourcesOptions{}))
	for _, t := range l.tracked {
		if !t.counts(p, group) {
			continue
		}
		within := wait <= t.h.Spec.Target.Wait.Duration
		t.waits.Observe(now, wait, within)
		podWait.WithLabelValues(t.h.Name, group).Observe(wait.Seconds())
		if c := t.shapes.Route(req, pp.since, now); c != nil {
			c.Arrived(pp.since, now)
		}
		t.largest.observe(now, t.shape.Units(req))
		if t.rec != nil {
			t.rec.Arrived(pp.since, now, req)
			t.changed = true
		}
		if t.burst != nil {
			t.burst.Arrived(pp.since, now, req)
		}
	}
}

// podGone records a bound pod's departure from the demand.
func (l *Learner) podGone(p *corev1.Pod) {
	key := client.ObjectKeyFromObject(p)
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, key)
	if p.Spec.NodeName == "" || len(l.tracked) == 0 || podutil.IsTerminal(p) {
		return // a finished pod left when it finished (podSeen)
	}
	l.left(p, now)
}

// left records a bound pod's departure from the demand of the Headrooms
// that count it; l.mu is held.
func (l *Learner) left(p *corev1.Pod, now time.Time) {
	group := l.groupOf(p.Spec.NodeName)
	req := demand.RequestsOf(resource.PodRequests(p, resource.PodResourcesOptions{}))
	for _, t := range l.tracked {
		if t.rec == nil || !t.counts(p, group) {
			continue
		}
		t.changed = true
		if c := t.shapes.Find(req); c != nil {
			c.Left(now, now)
		}
		t.rec.Left(now, now, req)
		if t.burst != nil {
			t.burst.Left(now, now, req)
		}
	}
}

// groupOf reads the node group of a node from the cache ("" if unknown).
func (l *Learner) groupOf(node string) string {
	full := &corev1.Node{}
	if err := l.Client.Get(context.Background(), client.ObjectKey{Name: node}, full); err != nil {
		return ""
	}
	return full.Labels[v1alpha1.LabelNodeGroup]
}

// counts reports whether a pod bound in the group counts for the
// Headroom: a workload pod (not a DaemonSet's, not berth's own) in its
// scope, selected by its podSelector.
func (t *tracked) counts(p *corev1.Pod, group string) bool {
	if p.Labels[v1alpha1.LabelHeadroomRole] != "" || podutil.IsDaemonSetPod(p) {
		return false
	}
	if t.groups != nil && !t.groups[group] {
		return false
	}
	return t.selector == nil || t.selector.Matches(labels.Set(p.Labels))
}

// round syncs the tracked Headrooms with the cluster, closes windows,
// estimates, publishes, and saves histories that changed.
func (l *Learner) round(ctx context.Context) error {
	hrs := &v1alpha1.HeadroomList{}
	if err := l.Client.List(ctx, hrs); err != nil {
		return err
	}
	var targets []*v1alpha1.Headroom
	for i := range hrs.Items {
		if h := &hrs.Items[i]; h.Spec.Target != nil && h.DeletionTimestamp == nil {
			targets = append(targets, h)
		}
	}
	var all []*v1alpha1.NodeGroup
	var nodePtrs []*corev1.Node
	if len(targets) > 0 { // the nodes time the launch window of a target only
		groups := &v1alpha1.NodeGroupList{}
		if err := l.Client.List(ctx, groups); err != nil {
			return err
		}
		// The cache's own nodes, read and never changed: a copy of every
		// node each round is megabytes in a large cluster.
		nodes := &corev1.NodeList{}
		if err := l.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		all = make([]*v1alpha1.NodeGroup, 0, len(groups.Items))
		for i := range groups.Items {
			all = append(all, &groups.Items[i])
		}
		nodePtrs = make([]*corev1.Node, 0, len(nodes.Items))
		for i := range nodes.Items {
			nodePtrs = append(nodePtrs, &nodes.Items[i])
		}
	}
	now := l.Clock.Now()
	seen := map[string]bool{}
	for _, h := range targets {
		seen[h.Name] = true
		if err := l.sync(ctx, h, all, nodePtrs, now); err != nil {
			log.FromContext(ctx).Error(err, "learning the demand", "headroom", h.Name)
		}
	}
	l.mu.Lock()
	for name := range l.tracked {
		if !seen[name] {
			delete(l.tracked, name)
			l.Targets.Delete(name)
			podWait.DeletePartialMatch(map[string]string{"headroom": name})
		}
	}
	if len(l.tracked) == 0 {
		clear(l.pending)
	}
	l.mu.Unlock()
	l.saveAll(ctx, false)
	return nil
}

// sync brings one Headroom's learner up to date and publishes.
func (l *Learner) sync(ctx context.Context, h *v1alpha1.Headroom, all []*v1alpha1.NodeGroup, nodes []*corev1.Node, now time.Time) error {
	scope, err := hr.ScopeGroups(h, all)
	if err != nil {
		return err // reported on the Headroom by its controller
	}
	var sel labels.Selector
	if ps := h.Spec.Target.PodSelector; ps != nil {
		if sel, err = metav1.LabelSelectorAsSelector(ps); err != nil {
			return fmt.Errorf("spec.target.podSelector: %w", err)
		}
	}
	shapeList := hr.TargetShape(h)
	shape := demand.ShapeOf(shapeList)
	window, measured := hr.LaunchWindow(hr.GroupsOrAll(scope, all), nodes)
	l.mu.Lock()
	t := l.tracked[h.Name]
	if !measured && t != nil && t.rec != nil {
		window = t.rec.H.Window // no node to time: keep the window learned in
	}
	if t == nil {
		t = &tracked{}
		l.tracked[h.Name] = t
	}
	t.h, t.selector = h, sel
	t.groups = nil
	if scope != nil {
		t.groups = map[string]bool{}
		for _, g := range scope {
			t.groups[g.Name] = true
		}
	}
	needLoad := t.rec == nil
	needBurst := h.Spec.Standby != nil && t.burst == nil
	l.mu.Unlock()

	var loaded, loadedBurst *demand.History
	var loadedShapes *demand.Saved
	if needLoad && len(shape) > 0 {
		loaded = loadAs[demand.History](ctx, l, h, historyKey)
		if h.Spec.Target.LearnsShapes() {
			loadedShapes = loadAs[demand.Saved](ctx, l, h, shapesKey)
		}
	}
	if needBurst && len(shape) > 0 {
		loadedBurst = loadAs[demand.History](ctx, l, h, burstKey)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	history := h.Spec.Target.History
	span := demand.DefaultHistory
	if history != nil && history.Duration > 0 {
		span = history.Duration
	}
	switch {
	case len(shape) == 0:
		t.rec, t.shapes = nil, nil // no shape: Resolve reports it
	case t.rec == nil:
		if loaded == nil || !loaded.Matches(window, shape) {
			loaded, loadedShapes = demand.NewHistory(window, shape, span, now), nil
		}
		t.rec = demand.NewRecorder(loaded, now)
		t.shape, t.shapes = shape, nil
	case !t.rec.H.Matches(window, shape):
		// The launch time or the unit changed: what was counted does not
		// translate; start again.
		log.FromContext(ctx).Info("starting the demand history again", "headroom", h.Name, "window", window, "unit", shapeList)
		t.rec = demand.NewRecorder(demand.NewHistory(window, shape, span, now), now)
		t.shape, t.shapes, t.changed = shape, nil, true
	}
	t.followShapes(loadedShapes, span, now)
	burstWindow := time.Duration(0)
	if h.Spec.Standby != nil {
		resume, measured := hr.ResumeWindow(hr.GroupsOrAll(scope, all), nodes, window)
		have := time.Duration(0)
		switch {
		case t.burst != nil:
			have = t.burst.H.Window
		case loadedBurst != nil:
			have = loadedBurst.Window // after a restart: the window it was learned in
		}
		burstWindow = hr.FollowBurstWindow(have, hr.BurstWindowRounded(resume, h.Spec.Target.Wait.Duration), measured)
	}
	t.burst = followBurst(t.burst, loadedBurst, burstWindow, shape, span, now)
	st := state.Target{Window: window, BurstWindow: burstWindow, BurstKnown: h.Spec.Standby != nil}
	share := hr.Share(h.Spec.Target)
	st.LastHour = t.waits.Over(now, time.Hour, share)
	st.LastDay = t.waits.Over(now, 24*time.Hour, share)
	st.LargestPod = t.largest.over(now)
	if t.rec != nil {
		if t.rec.H.HalfLife != span/2 {
			t.rec.H.HalfLife = span / 2
		}
		if t.rec.Close(now) > 0 {
			t.changed = true
		}
		// The history is asked for what the last day's waits fell short by.
		minHistory := l.MinHistory
		if minHistory <= 0 {
			minHistory = demand.MinHistory
		}
		st.Estimate = t.rec.H.EstimateAfter(now, demand.Corrected(share, st.LastDay), minHistory)
		st.Since, st.Windows, st.Bursts = t.rec.H.Since, t.rec.H.Seen, t.rec.H.Bursts
	}
	if t.shapes != nil {
		t.shapes.Close(now)
		minHistory := l.MinHistory
		if minHistory <= 0 {
			minHistory = demand.MinHistory
		}
		st.Shapes = t.shapes.Estimates(now, demand.Corrected(share, st.LastDay), minHistory)
	}
	if t.burst != nil {
		t.burst.H.HalfLife = span / 2
		t.burst.Close(now)
		minHistory := l.MinHistory
		if minHistory <= 0 {
			minHistory = demand.MinHistory
		}
		est := t.burst.H.EstimateAfter(now, demand.Corrected(share, st.LastDay), minHistory)
		st.Burst = &est
	}
	l.Targets.Set(h.Name, st)
	return nil
}

// followShapes keeps the learned shapes in step with the unit's history
// and the spec: none without spec.target.shapes Learned or a unit
// history; else the ones it has, or those saved (learned in the unit
// history's window), or new ones.
func (t *tracked) followShapes(saved *demand.Saved, span time.Duration, now time.Time) {
	if t.rec == nil || !t.h.Spec.Target.LearnsShapes() {
		t.shapes = nil
		return
	}
	if t.shapes == nil {
		t.shapes = demand.NewShapes(t.shape, t.rec.H.Window, span)
		if saved != nil {
			t.shapes.Restore(*saved, now)
		}
	}
	t.shapes.SetSpan(span)
}

// checked is a persisted history that can check itself once read.
type checked interface {
	Check() error
}

// loadAs reads one key of a Headroom's ConfigMap as a T; nil when there
// is none or it cannot be used (it is then started again, and said so).
func loadAs[T any, PT interface {
	*T
	checked
}](ctx context.Context, l *Learner, h *v1alpha1.Headroom, key string) *T {
	v := PT(new(T))
	if !l.load(ctx, h, key, v) {
		return nil
	}
	return (*T)(v)
}

// load reads one key of a Headroom's ConfigMap into v; false when there
// is none or it cannot be used.
func (l *Learner) load(ctx context.Context, h *v1alpha1.Headroom, key string, v checked) bool {
	cm := &corev1.ConfigMap{}
	err := l.APIReader.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ConfigMapPrefix + h.Name}, cm)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "reading the demand history", "headroom", h.Name)
		}
		return false
	}
	// Owned by another incarnation of the Headroom: not this one's.
	if owner := metav1.GetControllerOf(cm); owner == nil || owner.UID != h.UID {
		return false
	}
	data, ok := cm.Data[key]
	if !ok {
		return false
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		log.FromContext(ctx).Info("demand history unreadable, starting again", "headroom", h.Name, "key", key, "error", err.Error())
		return false
	}
	if err := v.Check(); err != nil {
		log.FromContext(ctx).Info("demand history invalid, starting again", "headroom", h.Name, "key", key, "error", err.Error())
		return false
	}
	return true
}

// saveAll writes the histories that changed and were not saved for
// saveEvery (all that changed when final).
func (l *Learner) saveAll(ctx context.Context, final bool) {
	now := l.Clock.Now()
	type job struct {
		h    *v1alpha1.Headroom
		data map[string]string
	}
	var jobs []job
	l.mu.Lock()
	for _, t := range l.tracked {
		if t.rec == nil || !t.changed || (!final && now.Sub(t.saved) < saveEvery) {
			continue
		}
		b, err := json.Marshal(t.rec.H)
		if err != nil {
			continue
		}
		data := map[string]string{historyKey: string(b)}
		if t.burst != nil {
			if b, err := json.Marshal(t.burst.H); err == nil {
				data[burstKey] = string(b)
			}
		}
		if t.shapes != nil {
			if b, err := json.Marshal(t.shapes.Save()); err == nil {
				data[shapesKey] = string(b)
			}
		}
		if dropped := fitConfigMap(data); len(dropped) > 0 {
			log.FromContext(ctx).Info("demand history too large for its ConfigMap: not saved, relearned after a restart",
				"headroom", t.h.Name, "keys", dropped, "limit", maxConfigMapData)
		}
		jobs = append(jobs, job{h: t.h, data: data})
		t.changed, t.saved = false, now
	}
	l.mu.Unlock()
	for _, j := range jobs {
		if err := l.save(ctx, j.h, j.data); err != nil {
			log.FromContext(ctx).Error(err, "saving the demand history", "headroom", j.h.Name)
		}
	}
}

// maxConfigMapData bounds what a history's ConfigMap holds: the API
// server refuses an object over 1 MiB, and one refused save would lose
// every history of the Headroom at the next restart.
const maxConfigMapData = 900 << 10

// fitConfigMap leaves out of data what does not fit in maxConfigMapData:
// the learned shapes first, then the burst history, then the launch
// windows' (each is relearned after a restart); it returns the keys it
// left out.
func fitConfigMap(data map[string]string) []string {
	size := func() int {
		n := 0
		for k, v := range data {
			n += len(k) + len(v)
		}
		return n
	}
	var dropped []string
	for _, key := range []string{shapesKey, burstKey, historyKey} {
		if size() <= maxConfigMapData {
			break
		}
		if _, ok := data[key]; ok {
			delete(data, key)
			dropped = append(dropped, key)
		}
	}
	return dropped
}

func (l *Learner) save(ctx context.Context, h *v1alpha1.Headroom, data map[string]string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.SystemNamespace, Name: ConfigMapPrefix + h.Name,
		Labels: map[string]string{v1alpha1.LabelHeadroom: h.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Headroom", Name: h.Name, UID: h.UID,
			Controller: ptr.To(true)}}},
		Data: data}
	err := l.Client.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := &corev1.ConfigMap{}
	if err := l.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), cur); err != nil {
		return err
	}
	cur.Data, cur.OwnerReferences, cur.Labels = cm.Data, cm.OwnerReferences, cm.Labels
	return l.Client.Update(ctx, cur)
}
