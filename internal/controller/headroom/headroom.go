// Package headroom is the controller of Headroom objects: it resolves how
// many units each keeps (manual, automatic, schedules) into status, runs
// placeholder pods and the per-node reserve DaemonSet, reports how many
// units are ready, and records events when headroom is consumed and
// restored. The provisioner adds missing units to its plans.
package headroom

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/notify"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/state"
	"github.com/berth-dev/berth/internal/statusupdate"
)

// Name is the controller's name.
const Name = "headroom"

// Event reasons on a Headroom.
const (
	ReasonConsumed    = "HeadroomConsumed"
	ReasonRestored    = "HeadroomRestored"
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonForbidden: the API server refused, as forbidden, an object
	// berth makes for the Headroom (its RBAC, an admission policy).
	ReasonForbidden = "Forbidden"
)

// resyncPeriod re-resolves automatic headroom, which follows the workload.
const resyncPeriod = 10 * time.Second

// ReadySource tells how many units of a headroom fit in free capacity.
type ReadySource interface {
	Get(key state.Key) (int32, bool)
}

// TargetSource tells what the demand learner knows of a Headroom with a
// target.
type TargetSource interface {
	Get(name string) (state.Target, bool)
}

// StandbySource tells the state of a Headroom's standby tier.
type StandbySource interface {
	Get(key state.Key) (v1alpha1.StandbyStatus, bool)
}

// Reconciler reconciles Headrooms.
type Reconciler struct {
	Client   client.Client
	Ready    ReadySource
	Targets  TargetSource
	Standby  StandbySource
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// PauseImage runs in placeholder and per-node reserve pods (""
	// headroom.PauseImage).
	PauseImage string
	changes    *notify.Channel
}

// +kubebuilder:rbac:groups=berth.dev,resources=headrooms,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=headrooms/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=headrooms/finalizers,verbs=update
// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=berth-system,resources=deployments;daemonsets,verbs=create;update;patch;delete
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get

// Notify asks for a reconcile of a Headroom; never blocks.
func (r *Reconciler) Notify(name string) {
	r.changes.Notify(&v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// Register adds the controller to the manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	r.changes = notify.New(256)
	if err := mgr.Add(&priorityClasses{client: mgr.GetAPIReader()}); err != nil {
		return err
	}
	// Pods are owned by a ReplicaSet or the DaemonSet, not by the Headroom:
	// they are mapped by the Headroom label berth puts on them.
	podsOf := func(_ context.Context, o client.Object) []reconcile.Request {
		if h := o.GetLabels()[v1alpha1.LabelHeadroom]; h != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: h}}}
		}
		return nil
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.Headroom{}).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.DaemonSet{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podsOf)).
		WatchesRawSource(r.changes.Source()).
		Complete(r)
}

// Reconcile brings one Headroom's placeholders, reserve and status up to
// date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	h := &v1alpha1.Headroom{}
	if err := r.Client.Get(ctx, req.NamespacedName, h); err != nil {
		if client.IgnoreNotFound(err) == nil {
			forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	in, err := r.inputs(ctx, hr.ReadsPods(h))
	if err != nil {
		return reconcile.Result{}, err
	}
	learned, haveLearned := state.Target{}, false
	if h.Spec.Target != nil && r.Targets != nil {
		if learned, haveLearned = r.Targets.Get(h.Name); haveLearned {
			in.Targets = map[string]hr.TargetInput{h.Name: {Estimate: learned.Estimate, Window: learned.Window,
				Burst: learned.Burst, BurstWindow: learned.BurstWindow, BurstKnown: learned.BurstKnown, LargestPod: learned.LargestPod,
				Shapes: learned.Shapes}}
		}
	}
	res, resolveErr := hr.Resolve(h, in)
	status := h.Status.DeepCopy()
	status.ObservedGeneration = h.Generation
	if resolveErr != nil {
		r.Recorder.Eventf(h, nil, corev1.EventTypeWarning, ReasonInvalidSpec, "Resolve", "%v", resolveErr)
		msg := resolveErr.Error()
		if status.DesiredUnits > 0 {
			// As a Deployment whose new template fails keeps its old pods:
			// the units (and placeholders) of the last valid spec stay.
			msg += fmt.Sprintf("; berth keeps the %d units of the last valid spec until the spec is fixed", status.DesiredUnits)
		}
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonInvalidSpec, Message: msg, ObservedGeneration: h.Generation})
		return reconcile.Result{}, r.writeStatus(ctx, h, status)
	}
	if err := r.placeholders(ctx, h, res); err != nil {
		return r.refused(ctx, h, status, "placeholder Deployment", err)
	}
	reserved, err := r.nodeReserve(ctx, h)
	if err != nil {
		return r.refused(ctx, h, status, "per-node reserve DaemonSet", err)
	}
	ready, planned, err := r.readyUnits(ctx, h, res)
	if err != nil {
		return reconcile.Result{}, err
	}
	if res.Total() == 0 {
		// No units to keep (a perNode-only Headroom, an automatic one whose
		// workload is gone): the provisioner never plans for it, and
		// nothing is missing.
		ready, planned = 0, true
	}
	status.DesiredUnits, status.ReservedNodes = res.Total(), reserved
	status.LearnedUnits = res.Learned
	status.ActiveSchedule = res.ActiveSchedule
	status.Unit = nil
	if len(res.Shape.Resources) > 0 {
		status.Unit = res.Shape.DeepCopy()
	}
	r.reportProblems(h, status, res)
	r.reportTarget(h, status, res, learned, haveLearned)
	status.Standby = nil
	if h.Spec.Standby != nil {
		status.Standby = &v1alpha1.StandbyStatus{DesiredUnits: h.Spec.Standby.Count, Message: "the standby controller has not looked at this Headroom yet"}
		if r.Standby != nil {
			if st, ok := r.Standby.Get(state.HeadroomKey(h.Name)); ok {
				status.Standby = &st
			}
		}
		// The standby controller keeps what Resolve asks for: the count,
		// or the target's share.
		status.Standby.DesiredUnits = res.Standby
	}
	requeue := r.requeue(h)
	if planned {
		status.ReadyUnits = min(ready, res.Total())
		r.transition(h, status)
		if why := r.placeholdersRefused(ctx, h); why != "" && status.ReadyUnits < status.DesiredUnits {
			// No placeholder pod waits for a node: nothing is launched
			// for the missing units, whatever "berth launches nodes for
			// the rest" would say.
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: v1alpha1.ReasonPlaceholdersNotCreated, ObservedGeneration: h.Generation,
				Message: fmt.Sprintf("%d of %d units fit; the placeholder pods of the rest cannot be created: %s", status.ReadyUnits, status.DesiredUnits, why)})
		}
	} else {
		// The provisioner has not planned since berth started: what fits
		// is not known yet. Keep the last readiness rather than report the
		// headroom consumed (and restored a moment later).
		status.ReadyUnits = min(status.ReadyUnits, res.Total())
		requeue = notPlannedRequeue
	}
	observe(h.Name, status)
	return reconcile.Result{RequeueAfter: requeue}, r.writeStatus(ctx, h, status)
}

// refused reports the placeholder or reserve object (what) the API
// server refused as invalid (a pod template it does not admit, from the
// Headroom's unit): the Headroom is not Ready (InvalidSpec), with the
// server's reason, and a warning event says it. Retrying cannot help
// until the spec changes, which reconciles again. Any other error is
// returned, to be retried.
//
// A Forbidden answer (berth's RBAC, an admission policy or plugin such
// as OwnerReferencesPermissionEnforcement) is said the same way, with
// reason Forbidden, and the write is retried: it succeeds once the
// rights are granted.
func (r *Reconciler) refused(ctx context.Context, h *v1alpha1.Headroom, status *v1alpha1.HeadroomStatus, what string, err error) (reconcile.Result, error) {
	reason, eventReason, retry := v1alpha1.ReasonInvalidSpec, ReasonInvalidSpec, error(nil)
	switch {
	case apierrors.IsInvalid(err):
	case apierrors.IsForbidden(err):
		reason, eventReason, retry = v1alpha1.ReasonForbidden, ReasonForbidden, err
	default:
		return reconcile.Result{}, err
	}
	msg := fmt.Sprintf("the API server refused the %s berth made from this Headroom: %v", what, err)
	if c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Message != msg {
		r.Recorder.Eventf(h, nil, corev1.EventTypeWarning, eventReason, "Apply", "%s", msg)
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: h.Generation})
	if err := r.writeStatus(ctx, h, status); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, retry
}

// notPlannedRequeue is how soon a headroom is looked at again while the
// provisioner has not planned yet (it also notifies when it has).
const notPlannedRequeue = 2 * time.Second

// reportProblems sets the SpecProblems condition and records an event when
// it changes: parts of the spec berth ignores (a schedule that never
// fires) and a count cut to the maximum.
func (r *Reconciler) reportProblems(h *v1alpha1.Headroom, status *v1alpha1.HeadroomStatus, res hr.Resolved) {
	problems := slices.Clone(res.Problems)
	if res.Capped {
		problems = append(problems, fmt.Sprintf("the spec asks for %.0f units; berth keeps at most %d per headroom", res.Wanted, hr.MaxUnits))
	}
	c := metav1.Condition{Type: v1alpha1.ConditionSpecProblems, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoProblems,
		Message: "berth uses the whole spec", ObservedGeneration: h.Generation}
	if len(problems) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonSpecIgnored, strings.Join(problems, "; ")
	}
	was := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionSpecProblems)
	if c.Status == metav1.ConditionTrue && (was == nil || was.Message != c.Message) {
		r.Recorder.Eventf(h, nil, corev1.EventTypeWarning, v1alpha1.ReasonSpecIgnored, "Resolve", "%s", c.Message)
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

func (r *Reconciler) inputs(ctx context.Context, withPods bool) (hr.Inputs, error) {
	in := hr.Inputs{Now: r.Clock.Now()}
	ngs := &v1alpha1.NodeGroupList{}
	nodes := &corev1.NodeList{}
	dss := &appsv1.DaemonSetList{}
	lists := []client.ObjectList{ngs, nodes, dss}
	pods := &corev1.PodList{}
	if withPods {
		lists = append(lists, pods)
	}
	for _, l := range lists {
		// Read only (hr.Resolve is pure): the cache's objects are not
		// copied, which on a large cluster would be every pod's spec
		// each reconcile.
		if err := r.Client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return in, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	for i := range ngs.Items {
		in.NodeGroups = append(in.NodeGroups, &ngs.Items[i])
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName != "" {
			in.Pods = append(in.Pods, &pods.Items[i])
		}
	}
	asRun, err := clusterread.DaemonSetsAsRun(ctx, r.Client, pointers(dss.Items))
	if err != nil {
		return in, err
	}
	in.DaemonSets = daemonset.Pods(asRun)
	return in, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// readyUnits: with placeholders, the placeholder pods that run (and the
// learned shapes' units the provisioner's latest plan fit, which are not
// placeholders); otherwise what the provisioner's latest plan fit in free
// capacity of Ready nodes. known is false while the provisioner has not
// planned for the headroom since berth started.
func (r *Reconciler) readyUnits(ctx context.Context, h *v1alpha1.Headroom, res hr.Resolved) (ready int32, known bool, err error) {
	if !h.Spec.Placeholders {
		ready, known := r.Ready.Get(state.HeadroomKey(h.Name))
		return ready, known, nil
	}
	learned := int32(0)
	if len(res.Learned) > 0 {
		fit, planned := r.Ready.Get(state.HeadroomKey(h.Name))
		if !planned {
			return 0, false, nil
		}
		learned = min(fit, res.Total()-res.Count)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels(hr.PlaceholderLabels(h))); err != nil {
		return 0, false, fmt.Errorf("listing placeholders: %w", err)
	}
	var n int32
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return min(n, res.Count) + learned, true, nil
}

// transition sets the Ready condition and records consumed and restored
// events when the ready count crosses the desired count.
func (r *Reconciler) transition(h *v1alpha1.Headroom, status *v1alpha1.HeadroomStatus) {
	was := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionReady)
	c := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: h.Generation}
	switch {
	case status.DesiredUnits == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonAllUnitsReady, "the headroom keeps no units now"
	case status.ReadyUnits >= status.DesiredUnits:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonAllUnitsReady
		c.Message = fmt.Sprintf("%d of %d units fit in free capacity", status.ReadyUnits, status.DesiredUnits)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonUnitsMissing
		c.Message = fmt.Sprintf("%d of %d units fit in free capacity; berth launches nodes for the rest", status.ReadyUnits, status.DesiredUnits)
	}
	meta.SetStatusCondition(&status.Conditions, c)
	switch {
	case was != nil && was.Status == metav1.ConditionTrue && c.Status == metav1.ConditionFalse && h.Status.DesiredUnits == status.DesiredUnits:
		r.Recorder.Eventf(h, nil, corev1.EventTypeNormal, ReasonConsumed, "Consume",
			"Headroom consumed: %d of %d units left in free capacity", status.ReadyUnits, status.DesiredUnits)
	case was != nil && was.Status == metav1.ConditionFalse && was.Reason == v1alpha1.ReasonUnitsMissing && c.Status == metav1.ConditionTrue:
		r.Recorder.Eventf(h, nil, corev1.EventTypeNormal, ReasonRestored, "Restore",
			"Headroom restored: %d of %d units fit in free capacity", status.ReadyUnits, status.DesiredUnits)
	}
}

func (r *Reconciler) requeue(h *v1alpha1.Headroom) time.Duration {
	if h.Spec.Automatic != nil || len(h.Spec.Schedules) > 0 || h.Spec.Target != nil {
		return resyncPeriod
	}
	return 0
}

func (r *Reconciler) writeStatus(ctx context.Context, h *v1alpha1.Headroom, status *v1alpha1.HeadroomStatus) error {
	if equality.Semantic.DeepEqual(&h.Status, status) {
		return nil
	}
	h.Status = *status
	if err := statusupdate.Update(ctx, r.Client, h); err != nil {
		return fmt.Errorf("updating status of headroom %s: %w", h.Name, err)
	}
	return nil
}
