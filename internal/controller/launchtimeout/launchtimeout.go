// Package launchtimeout deletes nodes that berth launched but that did not
// become Ready within the maximum provision time. Their pods are still
// pending, so the provisioner launches a replacement, from another
// offering: the one that timed out is marked unavailable for a while.
//
// It acts only on what it knows berth caused: a node carrying berth's owner
// mark (the UID of the NodeGroup it was launched for) that has never been
// Ready. The first time it sees a berth node Ready it labels it
// initialized, durably, and never deletes it afterwards: a node that goes
// NotReady later (kubelet restart, network partition) is not a failed
// launch, and deleting it without a drain would take its pods down, or a
// whole fleet in a partition. A node adopted when it had lived longer than
// the max provision time (a Cluster API node berth did not see born) is
// not a launch either. And each decision is capped: a few nodes a minute,
// a share of a group at once, none in a group whose Ready nodes went
// NotReady together.
package launchtimeout

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/podutil"
)

// Name is the controller's name.
const Name = "launchtimeout"

// Event reasons.
const (
	// ReasonLaunchTimeout is on a node that is deleted.
	ReasonLaunchTimeout = "LaunchTimeout"
	// ReasonLaunchTimeoutCapped is on a node that would be deleted but a
	// cap holds.
	ReasonLaunchTimeoutCapped = "LaunchTimeoutCapped"
	// ReasonLaunchTimeoutDeleteFailed is on a node whose deletion the
	// provider refused; it is retried.
	ReasonLaunchTimeoutDeleteFailed = "LaunchTimeoutDeleteFailed"
	// ReasonWasUp: a node never labelled up ran a pod, so it was up: it
	// is labelled so, and not deleted as a failed launch.
	ReasonWasUp = "WasUp"
)

// Unavailable marks offerings that should not be launched for a while.
type Unavailable interface {
	// MarkLaunchFailed marks an offering whose launch at launched failed
	// (found out only now).
	MarkLaunchFailed(off v1alpha1.OfferingKey, message string, launched time.Time)
}

// Reconciler enforces the maximum provision time.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache (the pods of one node); Client when
	// nil.
	APIReader        client.Reader
	Cloud            cloudprovider.CloudProvider
	Offerings        Unavailable
	Recorder         events.EventRecorder
	Clock            clock.PassiveClock
	MaxProvisionTime time.Duration

	caps caps
	// lastCapped is the last cap message per node, said once;
	// lastFailed the last refusal of its deletion.
	lastCapped, lastFailed sync.Map
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;delete;patch
// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups,verbs=get;list;watch

// Register adds the controller to the manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(Name).For(&corev1.Node{}).Complete(r)
}

// Reconcile checks one node.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) { // gone: nothing kept of it
			r.caps.done(req.Name)
			r.lastCapped.Delete(req.Name)
			r.lastFailed.Delete(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	group := node.Labels[v1alpha1.LabelNodeGroup]
	if group == "" || node.DeletionTimestamp != nil || node.Labels[v1alpha1.LabelInitialized] == "true" {
		return reconcile.Result{}, nil
	}
	if nodeutil.Ready(node) {
		if node.Annotations[v1alpha1.AnnotationLaunchedBy] == "" {
			return reconcile.Result{}, nil // not berth's: nothing to mark (and berth may not write it)
		}
		return reconcile.Result{}, r.markInitialized(ctx, node, true)
	}
	if lifecycle.AdoptedOld(node, r.MaxProvisionTime) {
		return reconcile.Result{}, nil // it lived before berth knew it: not a launch
	}
	age := r.Clock.Since(node.CreationTimestamp.Time)
	if age < r.MaxProvisionTime {
		return reconcile.Result{RequeueAfter: r.MaxProvisionTime - age}, nil
	}
	inst, err := r.launchedByBerth(ctx, node)
	if err != nil || inst == nil {
		return reconcile.Result{}, err
	}
	if pod, err := r.ranAPod(ctx, node); err != nil {
		return reconcile.Result{}, err
	} else if pod != "" {
		// Ready once while no replica of berth watched it (a failover):
		// not a failed launch, but a node that went down (repair's matter).
		log.FromContext(ctx).Info("not deleting NotReady node never labelled up: a pod ran on it", "node", node.Name, "pod", pod)
		r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, ReasonWasUp, "Label",
			"Node was never seen Ready by berth, but pod %s ran on it: it was up, not a failed launch; labelled %s and left to repair", pod, v1alpha1.LabelInitialized)
		return reconcile.Result{}, r.markInitialized(ctx, node, false)
	}
	if inst.NotLaunched {
		log.FromContext(ctx).V(1).Info("not deleting NotReady node: berth did not launch its instance (a Cluster API Machine a rollout or a hand-raised replica count made)", "node", node.Name)
		return reconcile.Result{}, nil
	}
	if r.caps.decided(node.Name) {
		// Its deletion was decided and counted; the provider refused it
		// (a rollout, a removal in progress): tried again, in no new slot.
		return reconcile.Result{}, r.delete(ctx, node)
	}
	peers := &corev1.NodeList{}
	if err := r.Client.List(ctx, peers, client.MatchingLabels{v1alpha1.LabelNodeGroup: group}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the nodes of %s: %w", group, err)
	}
	if ok, why := r.caps.allow(r.Clock.Now(), group, peers.Items); !ok {
		if last, _ := r.lastCapped.Load(node.Name); last != why {
			r.lastCapped.Store(node.Name, why)
			r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonLaunchTimeoutCapped, "Delete",
				"Node was never Ready in %s since launch, but it is not deleted now: %s", age.Round(time.Second), why)
		}
		capped.Inc()
		return reconcile.Result{RequeueAfter: CapWindow}, nil
	}
	r.caps.record(r.Clock.Now(), group, node.Name)
	r.lastCapped.Delete(node.Name)
	msg := fmt.Sprintf("Node was never Ready in %s since launch (max provision time %s); deleting it so that its pods get a replacement",
		age.Round(time.Second), r.MaxProvisionTime)
	log.FromContext(ctx).Info("deleting node that never became ready", "node", node.Name, "nodeGroup", group, "age", age.String())
	r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonLaunchTimeout, "Delete", "%s", msg)
	r.Offerings.MarkLaunchFailed(v1alpha1.OfferingKey{NodeGroup: group, InstanceType: node.Labels[v1alpha1.LabelInstanceType],
		Zone: node.Labels[v1alpha1.LabelZone], CapacityType: node.Labels[v1alpha1.LabelCapacityType]}, "node "+node.Name+" did not become Ready",
		nodeutil.BootedSince(node))
	timeouts.WithLabelValues(group).Inc()
	return reconcile.Result{}, r.delete(ctx, node)
}

// delete asks the provider to delete a node whose launch timed out; a
// refusal is said on the node (once per message) and retried.
func (r *Reconciler) delete(ctx context.Context, node *corev1.Node) error {
	err := r.Cloud.Delete(ctx, node.Name)
	if err == nil || cloudprovider.IsNotFound(err) {
		r.lastFailed.Delete(node.Name)
		return nil
	}
	msg := err.Error()
	if last, _ := r.lastFailed.Load(node.Name); last != msg {
		r.lastFailed.Store(node.Name, msg)
		r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonLaunchTimeoutDeleteFailed, "Delete",
			"Deleting the node that was never Ready failed; retrying: %s", msg)
	}
	return fmt.Errorf("deleting node %s: %w", node.Name, err)
}

// markInitialized records, on the node itself, that it has been Ready
// once. The patch is guarded by the node's resourceVersion so that it
// never races with a deletion or a relabel; on a conflict (a kubelet
// heartbeat or another controller wrote the node since it was read) the
// node is read again and labelled only if it is still Ready.
func (r *Reconciler) markInitialized(ctx context.Context, node *corev1.Node, whileReady bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		node.Labels[v1alpha1.LabelInitialized] = "true"
		err := r.Client.Patch(ctx, node, patch)
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &corev1.Node{}
		if getErr := r.Client.Get(ctx, client.ObjectKeyFromObject(node), fresh); getErr != nil {
			return getErr
		}
		if whileReady && !nodeutil.Ready(fresh) || fresh.DeletionTimestamp != nil || fresh.Labels[v1alpha1.LabelInitialized] == "true" {
			return nil
		}
		if fresh.Labels == nil {
			fresh.Labels = map[string]string{}
		}
		*node = *fresh
		return err
	})
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("labelling node %s initialized: %w", node.Name, err))
	}
	return nil
}

// ranAPod names a pod that ran on the node, if one did: one of a
// workload (not a DaemonSet's agent nor a static pod, which run on a node
// that is not Ready yet, nor a pod that tolerates the not-ready taint: an
// operator on the host network runs on a node whose network never came
// up) whose containers the kubelet ran (Running or Succeeded, or a
// container running or finished: a start time alone is written while the
// sandbox cannot be made). Such a node was Ready: its going NotReady is
// no failed launch, and deleting it would take its pods without a drain.
// Read past the cache (by spec.nodeName, which the cache does not index;
// it also keeps no container statuses); only for nodes past the max
// provision time.
func (r *Reconciler) ranAPod(ctx context.Context, node *corev1.Node) (string, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return "", fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; provesUp(p) {
			return p.Namespace + "/" + p.Name, nil
		}
	}
	return "", nil
}

// provesUp reports whether a pod bound to a node proves the node was up
// (ranAPod): a workload's pod that does not tolerate the not-ready taint
// and whose containers ran.
func provesUp(p *corev1.Pod) bool {
	if podutil.IsOwnedByDaemonSet(p) || podutil.IsDaemonSetPod(p) || podutil.IsMirror(p) ||
		v1helper.TolerationsTolerateTaint(klog.Background(), p.Spec.Tolerations, &notReady, false) {
		return false
	}
	ran := p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded
	for _, cs := range p.Status.ContainerStatuses {
		ran = ran || cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil
	}
	return ran
}

// notReady is the node lifecycle's taint on a node that is not Ready.
var notReady = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}

// launchedByBerth returns the instance behind the node when it is one of
// berth's groups': its owner mark matches the UID of the NodeGroup it is
// labelled with, and the cloud provider knows the instance (nil
// otherwise: a node labelled by hand, a node of a deleted and recreated
// group, left alone and logged). Whether berth's launch made it is the
// instance's NotLaunched.
func (r *Reconciler) launchedByBerth(ctx context.Context, node *corev1.Node) (*cloudprovider.Instance, error) {
	logger := log.FromContext(ctx).WithValues("node", node.Name)
	ng := &v1alpha1.NodeGroup{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: node.Labels[v1alpha1.LabelNodeGroup]}, ng); apierrors.IsNotFound(err) {
		logger.V(1).Info("not deleting NotReady node: its node group does not exist")
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if mark := node.Annotations[v1alpha1.AnnotationLaunchedBy]; mark == "" || mark != string(ng.UID) {
		logger.V(1).Info("not deleting NotReady node: it does not carry this node group's owner mark", "mark", mark)
		return nil, nil
	}
	inst, err := r.Cloud.Get(ctx, node.Name)
	if cloudprovider.IsNotFound(err) {
		return nil, nil // not launched by this provider
	} else if err != nil {
		return nil, err
	}
	return inst, nil
}
