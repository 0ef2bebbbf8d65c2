// Package nodegroup keeps NodeGroup status true: how many nodes the group
// has and how many are Ready, their total capacity and price, and the
// LaunchFailing condition while some of its offerings fail to launch.
package nodegroup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

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
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/notify"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/state"
	"github.com/berth-dev/berth/internal/statusupdate"
)

// Name is the controller's name.
const Name = "nodegroup"

// Condition reasons.
const (
	// ReasonInsufficientCapacity, ReasonLaunchError, ReasonLaunchTimedOut
	// and ReasonCapacityReclaimed: LaunchFailing is True and every current
	// failure has that reason (state.Failure*); ReasonLaunchFailed when
	// they differ, or one was read back from a status without its reason.
	ReasonInsufficientCapacity = state.FailureInsufficientCapacity
	ReasonLaunchError          = state.FailureLaunchError
	ReasonLaunchTimedOut       = state.FailureTimedOut
	ReasonCapacityReclaimed    = state.FailureCapacityReclaimed
	ReasonLaunchFailed         = "LaunchFailed"
	ReasonNoRecentFailures     = "NoRecentFailures"
	// ReasonPendingAfterLaunchFailure: scale-down is suspended, a launch
	// for a pending pod failed in the group.
	ReasonPendingAfterLaunchFailure = "PendingAfterLaunchFailure"
	// ReasonLaunchingForPendingPods: scale-down is suspended while a node
	// launched for a pending pod comes up.
	ReasonLaunchingForPendingPods = "LaunchingForPendingPods"
	// ReasonScaleDownActive: scale-down is not suspended.
	ReasonScaleDownActive = "NotSuspended"
)

// Failures is what the controller needs to know about failed launches.
type Failures interface {
	Failures(nodeGroup string) []state.Failure
	NextExpiry(nodeGroup string) time.Time
	// RestoreStatus takes back the failures a previous leader recorded in
	// the group's status (state.Offerings.RestoreStatus).
	RestoreStatus(ng *v1alpha1.NodeGroup) int
}

// Holds tells whether scale-down holds a node group, and why.
type Holds interface {
	Of(nodeGroup string) (state.Hold, bool)
}

// Reconciler computes NodeGroup status.
type Reconciler struct {
	Client   client.Client
	Failures Failures
	// Holds are the groups where scale-down starts no removal (nil: none).
	Holds Holds
	// Activity is the last launch and removal per group (nil: none).
	Activity *state.Activity
	// Removals undoes a removal the provider holds half-done for a node
	// of a group deleted with deletionPolicy Orphan (nil: none to undo).
	Removals cloudprovider.RemovalCanceler
	// Unadopted lists the machines berth launched for a group whose
	// nodes are not the group's yet (a Cluster API Machine still
	// booting), which a group deleted with deletionPolicy Drain waits for
	// (nil: none).
	Unadopted cloudprovider.UnadoptedLister
	Clock     clock.PassiveClock
	Recorder  events.EventRecorder
	// MaxProvisionTime is the controller's --max-provision-time: a node
	// adopted younger is repair's only once seen Ready (zero: the
	// default, disruption.DefaultMaxProvisionTime).
	MaxProvisionTime time.Duration
	// changes receives node groups whose launches failed.
	changes *notify.Channel
	// lastDeleting is the last message said per group being deleted.
	lastDeleting map[string]string
	// restored are the groups whose status's unavailable offerings this
	// process took back (restoreFailures).
	restored sync.Map
}

// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Notify asks for a reconcile of a node group (e.g. after a failed
// launch). Safe to call from any goroutine; never blocks.
func (r *Reconciler) Notify(nodeGroup string) {
	r.changes.Notify(&v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: nodeGroup}})
}

// Register adds the controller to the manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	r.changes = notify.New(64)

	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.NodeGroup{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if g := o.GetLabels()[v1alpha1.LabelNodeGroup]; g != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: g}}}
			}
			return nil
		})).
		WatchesRawSource(r.changes.Source()).
		Complete(r)
}

// Reconcile updates one node group's status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ng := &v1alpha1.NodeGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, ng); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.Name)
			r.restored.Delete(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: ng.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodes of %s: %w", ng.Name, err)
	}
	if ng.DeletionTimestamp != nil {
		if r.lastDeleting == nil {
			r.lastDeleting = map[string]string{}
		}
		return r.finalize(ctx, ng, nodes.Items)
	}
	if err := r.ensureFinalizer(ctx, ng); err != nil {
		return reconcile.Result{}, err
	}
	r.restoreFailures(ng)
	status := r.compute(ng, nodes.Items)
	meta.SetStatusCondition(&status.Conditions, r.suspendCondition(ng))
	status.NodesByState = nodesByState(ng, nodes.Items, r.Clock.Now(), r.maxProvisionTime())
	status.LastScaleUp, status.LastScaleDown = ng.Status.LastScaleUp, ng.Status.LastScaleDown
	if up, down := r.Activity.Last(ng.Name); up != nil || down != nil {
		status.LastScaleUp, status.LastScaleDown = scaleEvent(up, status.LastScaleUp), scaleEvent(down, status.LastScaleDown)
	}
	observe(ng, &status.NodeGroupStatus, status.price)
	result := reconcile.Result{}
	if exp := r.Failures.NextExpiry(ng.Name); !exp.IsZero() {
		// Clear the condition when the failure is forgotten.
		result.RequeueAfter = min(max(exp.Sub(r.Clock.Now()), time.Second), 30*time.Second)
	}
	if equality.Semantic.DeepEqual(ng.Status, status.NodeGroupStatus) {
		return result, nil
	}
	ng.Status = status.NodeGroupStatus
	if err := statusupdate.Update(ctx, r.Client, ng); err != nil {
		return reconcile.Result{}, fmt.Errorf("updating status of %s: %w", ng.Name, err)
	}
	return result, nil
}

type computed struct {
	v1alpha1.NodeGroupStatus
	price float64
}

func (r *Reconciler) compute(ng *v1alpha1.NodeGroup, nodes []corev1.Node) computed {
	out := computed{NodeGroupStatus: v1alpha1.NodeGroupStatus{
		ObservedGeneration: ng.Generation,
		Conditions:         append([]metav1.Condition(nil), ng.Status.Conditions...),
	}}
	resources := corev1.ResourceList{}
	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp != nil {
			continue
		}
		out.Nodes++
		if nodeutil.Ready(n) {
			out.ReadyNodes++
		}
		for name, q := range n.Status.Capacity {
			sum := resources[name]
			sum.Add(q)
			resources[name] = sum
		}
		_, o := ng.FindOffering(n.Labels[v1alpha1.LabelInstanceType], n.Labels[v1alpha1.LabelZone], v1alpha1.CapacityType(n.Labels[v1alpha1.LabelCapacityType]))
		if o != nil {
			price := o.Price
			if nodeutil.Suspended(n) {
				price = o.StoppedPrice // a suspended standby node costs its stopped price, as its Headroom counts it
			}
			if p, err := price(); err == nil {
				out.price += p
			}
		}
	}
	if len(resources) > 0 {
		out.Resources = resources
	}
	if out.Nodes > 0 {
		out.PricePerHour = strconv.FormatFloat(out.price, 'f', 4, 64)
	}
	meta.SetStatusCondition(&out.Conditions, r.launchCondition(ng))
	for _, f := range r.Failures.Failures(ng.Name) {
		msg := f.Message
		if len(msg) > 1024 {
			msg = msg[:1021] + "..."
		}
		out.UnavailableOfferings = append(out.UnavailableOfferings, v1alpha1.UnavailableOffering{
			InstanceType: f.Offering.InstanceType, Zone: f.Offering.Zone, CapacityType: v1alpha1.CapacityType(f.Offering.CapacityType),
			Until: metav1.NewTime(f.Until.Truncate(time.Second).Add(time.Second)), Streak: int32(min(f.Streak, 32)), Message: msg, Reason: f.Reason})
	}
	return out
}

func (r *Reconciler) launchCondition(ng *v1alpha1.NodeGroup) metav1.Condition {
	fails := r.Failures.Failures(ng.Name)
	if len(fails) == 0 {
		return metav1.Condition{Type: v1alpha1.ConditionLaunchFailing, Status: metav1.ConditionFalse, Reason: ReasonNoRecentFailures,
			Message: "No offering failed to launch recently", ObservedGeneration: ng.Generation}
	}
	parts := make([]string, 0, len(fails))
	reason := fails[0].Reason
	for _, f := range fails {
		if f.Reason != reason || reason == "" {
			reason = ReasonLaunchFailed
		}
		when := "at " + f.At.UTC().Format(time.RFC3339)
		if f.At.IsZero() { // restored from the status, which keeps only the expiry
			when = "before a restart, avoided until " + f.Until.UTC().Format(time.RFC3339)
		}
		parts = append(parts, fmt.Sprintf("%s/%s/%s %s", f.Offering.InstanceType, f.Offering.Zone, f.Offering.CapacityType, when))
	}
	return metav1.Condition{Type: v1alpha1.ConditionLaunchFailing, Status: metav1.ConditionTrue, Reason: reason,
		Message: fmt.Sprintf("Launches failed for %s (%s); berth uses other offerings until the failures expire",
			strings.Join(parts, ", "), fails[len(fails)-1].Message), ObservedGeneration: ng.Generation}
}

// suspendCondition is ScaleDownSuspended: True while scale-down holds the
// group for a pending pod (a node launching for it, or a launch for it
// that failed; as Ocean suspends scale-down until such a pod is
// scheduled).
func (r *Reconciler) suspendCondition(ng *v1alpha1.NodeGroup) metav1.Condition {
	var hold state.Hold
	held := false
	if r.Holds != nil {
		hold, held = r.Holds.Of(ng.Name)
	}
	if !held {
		return metav1.Condition{Type: v1alpha1.ConditionScaleDownSuspended, Status: metav1.ConditionFalse, Reason: ReasonScaleDownActive,
			Message: "Scale-down is not suspended", ObservedGeneration: ng.Generation}
	}
	reason := ReasonLaunchingForPendingPods
	if hold.Reason == state.HoldLaunchFailed {
		reason = ReasonPendingAfterLaunchFailure
	}
	return metav1.Condition{Type: v1alpha1.ConditionScaleDownSuspended, Status: metav1.ConditionTrue, Reason: reason,
		Message: "Scale-down is suspended: " + hold.Message, ObservedGeneration: ng.Generation}
}

// maxProvisionTime is MaxProvisionTime, or its default.
func (r *Reconciler) maxProvisionTime() time.Duration {
	if r.MaxProvisionTime <= 0 {
		return lifecycle.DefaultMaxProvisionTime
	}
	return r.MaxProvisionTime
}

// restoreFailures takes back, the first time this process sees a group,
// the offerings its status says a previous leader avoided after failed
// launches. The status is written from the offerings this process knows:
// computed before the provisioner's first round restored them (it reads
// the same status), it would clear them, and a new leader would launch at
// once on every offering the last one was backing off from.
func (r *Reconciler) restoreFailures(ng *v1alpha1.NodeGroup) {
	if _, done := r.restored.LoadOrStore(ng.Name, true); done {
		return
	}
	r.Failures.RestoreStatus(ng)
}
