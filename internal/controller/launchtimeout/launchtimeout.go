// Package launchtimeout deletes nodes that berth launched but that did not
// become Ready within the maximum provision time. Their pods are still
// pending, so the provisioner launches a replacement, from another
// offering: the one that timed out is marked unavailable for a while.
package launchtimeout

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// Name is the controller's name.
const Name = "launchtimeout"

// ReasonLaunchTimeout is the event reason on a node that is deleted.
const ReasonLaunchTimeout = "LaunchTimeout"

// Unavailable marks offerings that should not be launched for a while.
type Unavailable interface {
	MarkUnavailable(off scaleup.Offering, message string)
}

// Reconciler enforces the maximum provision time.
type Reconciler struct {
	Client           client.Client
	Cloud            cloudprovider.CloudProvider
	Offerings        Unavailable
	Recorder         events.EventRecorder
	Clock            clock.PassiveClock
	MaxProvisionTime time.Duration
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;delete

// Register adds the controller to the manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(Name).For(&corev1.Node{}).Complete(r)
}

// Reconcile checks one node.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	group := node.Labels[v1alpha1.LabelNodeGroup]
	if group == "" || node.DeletionTimestamp != nil || nodeutil.Ready(node) {
		return reconcile.Result{}, nil
	}
	age := r.Clock.Since(node.CreationTimestamp.Time)
	if age < r.MaxProvisionTime {
		return reconcile.Result{RequeueAfter: r.MaxProvisionTime - age}, nil
	}
	if _, err := r.Cloud.Get(ctx, node.Name); cloudprovider.IsNotFound(err) {
		return reconcile.Result{}, nil // not launched by this provider
	} else if err != nil {
		return reconcile.Result{}, err
	}
	msg := fmt.Sprintf("Node was not Ready %s after launch (max provision time %s); deleting it so that its pods get a replacement",
		age.Round(time.Second), r.MaxProvisionTime)
	log.FromContext(ctx).Info("deleting node that did not become ready", "node", node.Name, "nodeGroup", group, "age", age.String())
	r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonLaunchTimeout, "Delete", "%s", msg)
	r.Offerings.MarkUnavailable(scaleup.Offering{NodeGroup: group, InstanceType: node.Labels[v1alpha1.LabelInstanceType],
		Zone: node.Labels[v1alpha1.LabelZone], CapacityType: node.Labels[v1alpha1.LabelCapacityType]}, "node "+node.Name+" did not become Ready")
	if err := r.Cloud.Delete(ctx, node.Name); err != nil && !cloudprovider.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("deleting node %s: %w", node.Name, err)
	}
	timeouts.WithLabelValues(group).Inc()
	return reconcile.Result{}, nil
}
