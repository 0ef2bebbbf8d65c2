package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	"github.com/berth-dev/berth/internal/state"
)

// start taints a node, labels it to leave Services' load balancers
// (nodeutil.ExcludeFromLoadBalancers: no new connection goes to a node
// whose pods are evicted) and records when its drain started, in one
// patch guarded by the node's resourceVersion. The pods that must move as
// the decision saw them are remembered: any other pod found on the node
// later makes the removal be simulated again.
func (c *Controller) start(ctx context.Context, w *world, n *corev1.Node, reason v1alpha1.DisruptionReason, why string) error {
	n = w.own(n)
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	n.Spec.Taints = append(n.Spec.Taints, disruptedTaint)
	nodeutil.ExcludeFromLoadBalancers(n)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[v1alpha1.AnnotationDisruptionStarted] = c.Clock.Now().UTC().Format(time.RFC3339)
	if reason != "" {
		n.Annotations[v1alpha1.AnnotationDisruptionReason] = string(reason)
	}
	// An earlier drain's clocks (its taint taken off by hand, say) are
	// not this drain's, nor is its provider's acceptance or wait (a
	// Cluster API removal undone since): kept, this drain would skip its
	// evictions and go straight to the provider.
	delete(n.Annotations, v1alpha1.AnnotationRemovalAccepted)
	delete(n.Annotations, v1alpha1.AnnotationRemovalWaiting)
	delete(n.Annotations, v1alpha1.AnnotationDrainEmptied)
	delete(n.Annotations, v1alpha1.AnnotationDrainCriticalTurn)
	delete(n.Annotations, v1alpha1.AnnotationDrainVolumesWaited)
	delete(n.Annotations, v1alpha1.AnnotationDrainDeletionDelayed)
	delete(n.Annotations, v1alpha1.AnnotationReplacementLaunching) // it drains: no replacement of it is awaited
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("tainting node %s: %w", n.Name, err)
	}
	c.wrote(n, true)
	delete(c.emptied, n.Name)
	delete(c.criticalTurn, n.Name)
	delete(c.volumesWaited, n.Name)
	delete(c.deletionDelayed, n.Name)
	moving, _ := scaledown.CheckPods(w.input, n.Name, w.podsOn[n.Name])
	c.accounted[n.Name] = uids(moving)
	delete(c.removableSince, n.Name)
	log.FromContext(ctx).Info("draining node to remove it", "node", n.Name, "nodeGroup", n.Labels[v1alpha1.LabelNodeGroup], "why", why)
	c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonDisrupting, "ScaleDown",
		"Removing node: %s; tainted %s and evicting its pods", why, v1alpha1.TaintDisrupted)
	return nil
}

// advance moves a drain on. The node's pods are read from the API server;
// the drain timeout comes first: it wins while a pod still needs an
// eviction and when the pods cannot be read, but not over pods evicted
// and shutting down, which the node waits for (each until it is long
// terminating, podutil.TerminatingUntil: then it goes with the node),
// nor within the timeout after the last of them did (leftLast), or after
// the node was first found with no pod left (drainClock: pods that left
// after the timeout): a provider that does not remove the node then has
// the time a drain has. Then the
// pods are checked again (drain rules on every pod; a simulation when
// pods that were not part of the decision are there, and after a
// restart); the pods that must move are evicted; and once none is left
// the node is deleted.
func (c *Controller) advance(ctx context.Context, w *world, n *corev1.Node, res *Result) error {
	g := w.groups[n.Labels[v1alpha1.LabelNodeGroup]]
	asked, recent := c.deleted[n.Name]
	if n.DeletionTimestamp != nil || recent && c.Clock.Since(asked) < DeleteRetryInterval {
		return nil // going already
	}
	started, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationDisruptionStarted])
	_, accepted := removalAccepted(n)
	if err != nil && !accepted && owns(g, n) {
		// berth writes the taint and the start together: a taint without
		// its start is someone else's (a hand edit, a copied manifest), and
		// draining for it would take the node outside every budget, with
		// no timeout (its clock would start each round).
		res.GivenUp = append(res.GivenUp, n.Name)
		return c.giveUp(ctx, w, n, ReasonDrainStopped, fmt.Sprintf("Drain stopped, the node stays: it carries taint %s without %s, which berth writes with it: not a drain berth started",
			v1alpha1.TaintDisrupted, v1alpha1.AnnotationDisruptionStarted))
	} else if err != nil {
		started = c.Clock.Now() // a removal accepted: only the provider is awaited
	}
	if accepted, ok := removalAccepted(n); ok {
		return c.awaitRemoval(ctx, g, n, accepted, started, res)
	}
	if !owns(g, n) {
		return c.release(ctx, w, n, res)
	}
	if v := lifecycle.Interrupted(g, n, c.Clock.Now()); v != nil {
		if err := c.keepDeadline(ctx, w, g, n, v); err != nil {
			return err
		}
		return c.advanceInterrupted(ctx, w, g, n, started, v.Deadline, res)
	}
	// A drain that emptied the node and waits only for the provider to
	// remove it (a Cluster API MachineSet still making a Machine its
	// replicas ask for) is not given up while the provider may still be
	// launching that Machine: its pods are gone already.
	emptied, ok := removalWaiting(n)
	waiting := ok && c.Clock.Since(emptied) < c.maxProvisionTime()
	pods, err := c.freshPods(ctx, n.Name)
	left, moving, blocked, fresh := toEvict(w, n, pods, err == nil, started)
	last := leftLast(pods)
	timeout := g.Spec.Disruption.Timeout()
	detaching := false
	if fresh && blocked == nil && !slices.ContainsFunc(moving, func(p *corev1.Pod) bool { return !cameBack(p, started) }) {
		// Nothing is left to evict or shutting down (a pod long
		// terminating goes with the node): the removal has its time from
		// then, and comes once the volumes of the pods that left have
		// detached.
		last = later(c.drainClock(ctx, w, n, v1alpha1.AnnotationDrainEmptied, c.emptied, started), last)
		if !ok {
			detaching, last = c.detachWait(ctx, w, n, pods, last, started, timeout)
		}
		if !ok && !detaching {
			detaching, last = c.deletionDelay(ctx, w, n, last, started)
		}
	}
	refused := left
	if fresh && len(left) > 0 && !slices.ContainsFunc(left, func(p *corev1.Pod) bool { return !podutil.IsCritical(p) }) {
		// Only critical pods are left to evict: they wait for the others
		// to be gone (evicted last, below: the pods still to move, a pod
		// long terminating or one the drain lets go with the node aside),
		// and then have the drain's time from when they were found alone.
		refused = nil
		if !slices.ContainsFunc(moving, func(p *corev1.Pod) bool { return !podutil.IsCritical(p) && !cameBack(p, started) }) {
			at := c.drainClock(ctx, w, n, v1alpha1.AnnotationDrainCriticalTurn, c.criticalTurn, started)
			if at.After(last) {
				last = at
			}
			if c.Clock.Since(at) > timeout {
				refused = left
			}
		}
	}
	if c.Clock.Since(started) > timeout && !waiting && !detaching {
		if !fresh || len(refused) > 0 || c.Clock.Since(last) > timeout {
			drainTimeouts.WithLabelValues(g.Name).Inc()
			res.GivenUp = append(res.GivenUp, n.Name)
			msg := fmt.Sprintf("Drain did not finish within %s (pods still to evict: %s); the node stays", timeout, names(left))
			if fresh && len(left) == 0 && len(moving) == 0 {
				msg = fmt.Sprintf("Drain did not finish within %s: the node's pods are gone, but its provider did not remove it (events %s say why); the node stays",
					timeout, ReasonRemovalRefused)
			}
			return c.giveUp(ctx, w, n, ReasonDrainTimedOut, msg)
		}
	}
	if why := scaledown.OptedOut(n); why != "" {
		res.GivenUp = append(res.GivenUp, n.Name)
		return c.giveUp(ctx, w, n, ReasonDrainStopped, "Drain stopped, the node stays: it "+why)
	}
	if err != nil {
		return err
	}
	// fresh from here: moving and blocked are the pods read now.
	if blocked == nil && c.changed(n.Name, moving) {
		if blocked, err = scaledown.Recheck(w.withPodsOn(n.Name, pods), n.Name); err != nil {
			return err
		}
		if blocked == nil {
			c.accounted[n.Name] = uids(moving)
		}
	}
	if blocked != nil {
		res.GivenUp = append(res.GivenUp, n.Name)
		return c.giveUp(ctx, w, n, ReasonDrainStopped, fmt.Sprintf("Drain stopped, the node stays: %s (%s)", blocked.Message, blocked.Reason))
	}
	evicting := 0
	// Critical pods last (system-cluster-critical, system-node-critical:
	// DNS, metrics, admission webhooks the others may need while they
	// shut down), once every other pod to move is gone, as the kubelet's
	// graceful node shutdown and Karpenter's drain order them.
	var critical []*corev1.Pod
	others := 0
	for _, p := range moving {
		if cameBack(p, started) {
			continue
		}
		evicting++
		if podutil.IsCritical(p) {
			critical = append(critical, p)
			continue
		}
		others++
		if p.DeletionTimestamp == nil {
			c.evict(ctx, p)
		}
	}
	for _, p := range critical {
		if others == 0 && p.DeletionTimestamp == nil {
			c.evict(ctx, p)
		}
	}
	if evicting > 0 || detaching {
		return nil
	}
	return c.remove(ctx, g, n, started, pods, res)
}

// AnnotationEnableDaemonSetEviction is Cluster Autoscaler's opt-out of a
// DaemonSet pod from eviction when its node is removed ("false").
const AnnotationEnableDaemonSetEviction = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"

// evictDaemonSetPods asks, once its other pods are gone and before the
// node is removed, the Eviction API to evict the node's DaemonSet pods,
// best effort and without waiting, as Cluster Autoscaler does for a node
// that had pods to move (--daemonset-eviction-for-occupied-nodes, on by
// default; not for a node removed empty, as
// --daemonset-eviction-for-empty-nodes is off by default): an agent (a
// log shipper) gets its SIGTERM and grace period through the API, not
// only the machine's shutdown. Not those that tolerate the draining
// node's taint (their DaemonSet would make them again there) nor those
// whose pod says enable-ds-eviction "false".
func (c *Controller) evictDaemonSetPods(ctx context.Context, pods []*corev1.Pod) {
	for _, p := range pods {
		if !podutil.IsOwnedByDaemonSet(p) || p.DeletionTimestamp != nil || podutil.IsTerminal(p) || p.Annotations[AnnotationEnableDaemonSetEviction] == "false" ||
			v1helper.TolerationsTolerateTaint(klog.Background(), p.Spec.Tolerations, &disruptedTaint, snapshot.TolerationComparisonOperators) {
			continue
		}
		c.evict(ctx, p)
	}
}

// awaitRemoval follows a node whose removal the provider accepted and
// that is still there: the drain is over (nothing is evicted, no timeout
// gives it up, nothing untaints it: the removal cannot be undone); the
// provider is asked again, and after the max provision time a warning
// says the node lingers.
func (c *Controller) awaitRemoval(ctx context.Context, g *v1alpha1.NodeGroup, n *corev1.Node, accepted, started time.Time, res *Result) error {
	if !owns(g, n) {
		return nil // its group is gone; the machine is going all the same
	}
	if since := c.Clock.Since(accepted); !accepted.IsZero() && since > c.maxProvisionTime() {
		c.warnOnce(n, ReasonRemovalLingers, fmt.Sprintf("The provider accepted removing the node %s ago and it is still there; berth keeps asking", since.Round(time.Second)))
	}
	return c.remove(ctx, g, n, started, nil, res)
}

// keepDeadline acts on an interruption notice that comes while the node
// drains for another reason: its offering is avoided, and the deadline
// berth works out from the notice when it first sees it is written on
// the node (berth.dev/interruption-deadline), unless the notice or the
// drain gives one already: worked out again each round, it moved on
// with the clock, and the node was never removed by it.
func (c *Controller) keepDeadline(ctx context.Context, w *world, g *v1alpha1.NodeGroup, n *corev1.Node, v *lifecycle.Verdict) error {
	if n.Annotations[v1alpha1.AnnotationInterruptionDeadline] != "" || n.Annotations[v1alpha1.AnnotationDisruptionReason] == string(v1alpha1.ReasonInterrupted) {
		return nil
	}
	c.avoidInterrupted(g, n)
	n = w.own(n)
	patch := client.MergeFrom(n.DeepCopy())
	n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = v.Deadline.UTC().Format(time.RFC3339)
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("recording the interruption deadline of node %s: %w", n.Name, err)
	}
	log.FromContext(ctx).Info("interruption notice on a draining node", "node", n.Name, "deadline", v.Deadline)
	return nil
}

// removalWaiting returns when a provider first answered that the node
// waits on its own settling (AnnotationRemovalWaiting), if it did. An
// unreadable time does not count: the drain timeout decides.
func removalWaiting(n *corev1.Node) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationRemovalWaiting])
	return at, err == nil
}

// recordWaiting writes on the node when its provider first said the
// removal waits on its own settling: a restarted controller still waits
// for the provider rather than giving the emptied node up at the drain
// timeout.
func (c *Controller) recordWaiting(ctx context.Context, fresh *corev1.Node) error {
	patch := client.MergeFromWithOptions(fresh.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[v1alpha1.AnnotationRemovalWaiting] = c.Clock.Now().UTC().Format(time.RFC3339)
	if err := c.Client.Patch(ctx, fresh, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recording that node %s waits for its provider: %w", fresh.Name, err)
	}
	return nil
}

// removalAccepted returns when the provider accepted removing the node
// (AnnotationRemovalAccepted), if it did.
func removalAccepted(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[v1alpha1.AnnotationRemovalAccepted]
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true // accepted, at an unreadable time
	}
	return at, true
}

// disruptedTaint is the taint a draining node carries (start), the one
// the planner simulates a removal with.
var disruptedTaint = scaledown.DisruptedTaint()

// cameBack reports whether p came to the node after its drain started
// (at started) and tolerates the taint of a draining node (a toleration
// of every taint, as agents deployed by Deployments often carry): the
// pod its controller made again for one evicted was scheduled onto the
// same node, the emptiest. Evicted again, it would come back again, until
// the drain times out and starts again later. Such a pod is not evicted:
// it goes with the node, its room elsewhere still simulated. The pods
// that were on the node when the drain started are evicted, whatever
// they tolerate, so their PodDisruptionBudgets decide.
func cameBack(p *corev1.Pod, started time.Time) bool {
	return p.CreationTimestamp.After(started) &&
		v1helper.TolerationsTolerateTaint(klog.Background(), p.Spec.Tolerations, &disruptedTaint, snapshot.TolerationComparisonOperators)
}

// remove deletes a drained node through the cloud provider, after reading
// it once more from the API server: it must still be berth's and still be
// draining. Its DaemonSet pods (of pods, the fresh read of its pods; nil
// when not read) are evicted first (evictDaemonSetPods). Only the Node's
// own disappearance proves the removal; a provider that does not know the
// node leaves it tainted and says so.
func (c *Controller) remove(ctx context.Context, g *v1alpha1.NodeGroup, n *corev1.Node, started time.Time, pods []*corev1.Pod, res *Result) error {
	fresh := &corev1.Node{}
	if err := c.APIReader.Get(ctx, client.ObjectKeyFromObject(n), fresh); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("reading node %s: %w", n.Name, err))
	}
	if !owns(g, fresh) || !nodeutil.Disrupted(fresh) || fresh.DeletionTimestamp != nil {
		return nil // changed since the round read it: the next round decides
	}
	if _, accepted := removalAccepted(fresh); !accepted && scaledown.OptedOut(fresh) != "" && lifecycle.Interrupted(g, fresh, c.Clock.Now()) == nil {
		// Opted out since the round read it: the opt-out stops a drain
		// until the provider accepted the removal (advance gives it up
		// once the cache shows it; an interrupted node goes anyway).
		log.FromContext(ctx).Info("not removing a drained node: it opted out since the round read it", "node", n.Name, "optOut", scaledown.OptedOut(fresh))
		return nil
	}
	if fresh.Annotations[v1alpha1.AnnotationDisruptionReason] != string(v1alpha1.ReasonEmpty) {
		c.evictDaemonSetPods(ctx, pods)
	}
	err := c.Cloud.Delete(ctx, n.Name)
	if _, ok := removalWaiting(fresh); !ok && cloudprovider.IsRemovalWaiting(err) {
		if rerr := c.recordWaiting(ctx, fresh); rerr != nil {
			return errors.Join(fmt.Errorf("deleting node %s: %w", n.Name, err), rerr)
		}
	}
	if cloudprovider.IsNotFound(err) {
		c.warnOnce(n, ReasonProviderUnknown, fmt.Sprintf("The node's provider has no instance for it (%v); it stays tainted until the provider knows it, or the drain is given up", err))
		return nil
	} else if err != nil {
		if !cloudprovider.IsRemovalWaiting(err) {
			c.warnOnce(n, ReasonRemovalRefused, fmt.Sprintf("The node's provider refused to remove it: %v; berth asks again each round until the drain times out", err))
		}
		return fmt.Errorf("deleting node %s: %w", n.Name, err)
	}
	c.deleted[n.Name] = c.Clock.Now()
	if _, again := removalAccepted(fresh); again {
		log.FromContext(ctx).Info("asked the provider again to remove a node it accepted to remove earlier", "node", n.Name, "nodeGroup", g.Name)
		return nil // counted and announced the first time
	}
	// Durable before it is counted: a restart finds the removal accepted
	// (a node gone at once needs no record).
	patch := client.MergeFrom(fresh.DeepCopy())
	fresh.Annotations[v1alpha1.AnnotationRemovalAccepted] = c.Clock.Now().UTC().Format(time.RFC3339)
	if err := c.Client.Patch(ctx, fresh, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recording the accepted removal of node %s: %w", n.Name, err)
	}
	why := n.Annotations[v1alpha1.AnnotationDisruptionReason]
	if why == "" {
		why = "ScaleDown"
		if g.DeletionTimestamp != nil {
			why = "NodeGroupDeleted"
		}
	}
	c.Activity.ScaledDown(g.Name, state.ScaleEvent{Time: c.Clock.Now(), Node: n.Name, Reason: why,
		Message: fmt.Sprintf("drained in %s", c.Clock.Since(started).Round(time.Second))})
	drainDuration.Observe(c.Clock.Since(started).Seconds())
	removed.WithLabelValues(g.Name).Inc()
	delete(c.accounted, n.Name)
	res.Removed = append(res.Removed, n.Name)
	log.FromContext(ctx).Info("removed node", "node", n.Name, "nodeGroup", g.Name, "drain", c.Clock.Since(started).Round(time.Second).String())
	left := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && !podutil.IsMirror(p) && !podutil.IsDaemonSetPod(p) {
			left++
		}
	}
	if left > 0 {
		c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonRemoved, "ScaleDown", "Node's removal accepted by its provider after a drain of %s; %d pods still on it go with it",
			c.Clock.Since(started).Round(time.Second), left)
	} else {
		c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonRemoved, "ScaleDown", "Node's removal accepted by its provider after a drain of %s: its pods moved", c.Clock.Since(started).Round(time.Second))
	}
	return nil
}

// freshPods reads the pods bound to the node from the API server: the
// cache may not show a pod that landed a moment ago.
func (c *Controller) freshPods(ctx context.Context, node string) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.APIReader.List(ctx, list, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, fmt.Errorf("reading the pods of node %s: %w", node, err)
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// changed reports whether a pod must move that the decision (or the last
// check) did not account for; always after a restart.
func (c *Controller) changed(node string, moving []*corev1.Pod) bool {
	known, ok := c.accounted[node]
	if !ok {
		return true
	}
	for _, p := range moving {
		if !known[p.UID] {
			return true
		}
	}
	return false
}

func uids(pods []*corev1.Pod) map[types.UID]bool {
	out := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}

// evict asks the API server to evict a pod. Placeholders (berth's own
// headroom pods) are deleted: they are planned again. A refusal by a
// PodDisruptionBudget (429) or any other error is retried next round,
// never forced.
func (c *Controller) evict(ctx context.Context, p *corev1.Pod) {
	logger := log.FromContext(ctx).WithValues("pod", client.ObjectKeyFromObject(p), "node", p.Spec.NodeName)
	if p.Labels[v1alpha1.LabelHeadroomRole] != "" && p.Namespace == v1alpha1.SystemNamespace {
		if err := c.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
			logger.Info("could not delete placeholder; retrying next round", "error", err.Error())
		}
		return
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
	err := c.Client.SubResource("eviction").Create(ctx, p, ev)
	switch {
	case err == nil:
		logger.V(1).Info("evicted pod")
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// gone, or another pod of the same name: the next fresh read decides
	case apierrors.IsTooManyRequests(err):
		logger.V(1).Info("eviction refused by a PodDisruptionBudget; retrying next round", "error", err.Error())
	default:
		logger.Info("could not evict pod; retrying next round", "error", err.Error())
	}
}

// giveUp stops a drain: what the provider did of the removal is undone
// first; when it cannot be undone any more the node goes anyway and the
// drain goes on.
func (c *Controller) giveUp(ctx context.Context, w *world, n *corev1.Node, reason, msg string) error {
	if rc, ok := c.Cloud.(cloudprovider.RemovalCanceler); ok {
		if err := rc.CancelRemoval(ctx, n.Name); cloudprovider.IsRemovalCommitted(err) {
			c.warnOnce(n, reason, msg+"; but the provider's removal cannot be undone any more ("+err.Error()+"): the node goes")
			return nil
		} else if err != nil {
			return fmt.Errorf("undoing the provider's removal of node %s (the drain stays): %w", n.Name, err)
		}
	}
	return c.stop(ctx, w, n, reason, msg)
}

// release untaints a node berth drains for a node group that is gone (or
// was created again under the same name): it is not that group's to
// remove. A node without berth's owner mark (a taint copied by hand) is
// left alone.
func (c *Controller) release(ctx context.Context, w *world, n *corev1.Node, res *Result) error {
	if n.Annotations[v1alpha1.AnnotationLaunchedBy] == "" {
		return nil
	}
	res.GivenUp = append(res.GivenUp, n.Name)
	return c.giveUp(ctx, w, n, ReasonDrainStopped, fmt.Sprintf(
		"Drain stopped, the node stays: node group %q no longer exists or is not the one that launched the node", n.Labels[v1alpha1.LabelNodeGroup]))
}

// stop removes the taint and the drain's annotations: the node stays,
// and is not drained again for a cool-down (berth.dev/drain-given-up).
func (c *Controller) stop(ctx context.Context, w *world, n *corev1.Node, reason, msg string) error {
	n = w.own(n)
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	nodeutil.StopDrain(n)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[v1alpha1.AnnotationDrainGivenUp] = c.Clock.Now().UTC().Format(time.RFC3339)
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("untainting node %s: %w", n.Name, err)
	}
	c.wrote(n, false)
	delete(c.marks, n.Name)
	delete(c.accounted, n.Name)
	delete(c.emptied, n.Name)
	delete(c.criticalTurn, n.Name)
	delete(c.volumesWaited, n.Name)
	delete(c.deletionDelayed, n.Name)
	c.givenUp[n.Name] = c.Clock.Now()
	log.FromContext(ctx).Info("drain stopped; node stays", "node", n.Name, "reason", reason, "message", msg)
	c.Recorder.Eventf(n, nil, corev1.EventTypeWarning, reason, "ScaleDown", "%s", msg)
	return nil
}

// warnOnce records a warning on the node unless it was the last one said.
func (c *Controller) warnOnce(n *corev1.Node, reason, msg string) {
	c.sayOnce(n, corev1.EventTypeWarning, reason, msg)
}

// sayOnce records an event on the node unless it was the last one said.
func (c *Controller) sayOnce(n *corev1.Node, eventType, reason, msg string) {
	if c.lastWarned[n.Name] == msg {
		return
	}
	c.lastWarned[n.Name] = msg
	c.Recorder.Eventf(n, nil, eventType, reason, "ScaleDown", "%s", msg)
}

// toEvict are the pods of a draining node that still need an eviction:
// those that must move (CheckPods), not being deleted already and not
// come back (cameBack). fresh says pods were read from the API server;
// when they were not (ok false), those of the cache are named. A pod that
// now blocks the removal leaves none: the check after the timeout stops
// the drain and says why. moving and blocked are CheckPods' answer for
// those pods, read once for the rest of the round.
func toEvict(w *world, n *corev1.Node, pods []*corev1.Pod, fresh bool, started time.Time) (left, moving []*corev1.Pod, blocked *scaledown.Blocked, ok bool) {
	if !fresh {
		pods = w.podsOn[n.Name]
	}
	moving, blocked = scaledown.CheckPods(w.input, n.Name, pods)
	for _, p := range moving {
		if p.DeletionTimestamp == nil && !cameBack(p, started) {
			left = append(left, p)
		}
	}
	return left, moving, blocked, fresh
}

// drainClock is when the draining node first entered a phase of its
// drain (AnnotationDrainEmptied: nothing left to evict or shutting down;
// AnnotationDrainCriticalTurn: only critical pods left to evict), now the
// first time: the drain timeout counts again from then. It is written on
// the node, so that a restarted controller counts from the same time
// (counted from each restart, a drain whose provider never removes the
// node stayed tainted for ever under a controller restarting more often
// than the timeout); mem keeps it while the cache has not shown the
// write yet. A failed write leaves it in memory only. A time before the
// drain started (started) is an earlier drain's, and not read.
func (c *Controller) drainClock(ctx context.Context, w *world, n *corev1.Node, key string, mem map[string]time.Time, started time.Time) time.Time {
	if at, ok := recordedClock(n, key, mem, started); ok {
		return at
	}
	at := c.Clock.Now().UTC().Truncate(time.Second)
	mem[n.Name] = at
	own := w.own(n)
	patch := client.MergeFrom(own.DeepCopy())
	if own.Annotations == nil {
		own.Annotations = map[string]string{}
	}
	own.Annotations[key] = at.Format(time.RFC3339)
	if err := c.Client.Patch(ctx, own, patch); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("could not record the drain's time on the node; kept in memory", "node", n.Name, "annotation", key, "error", err.Error())
	}
	return at
}

// recordedClock is the time of a drain clock (drainClock) already
// recorded, in memory or on the node, if it is; one read from the node is
// kept in mem.
func recordedClock(n *corev1.Node, key string, mem map[string]time.Time, started time.Time) (time.Time, bool) {
	if at, ok := mem[n.Name]; ok {
		return at, true
	}
	if at, err := time.Parse(time.RFC3339, n.Annotations[key]); err == nil && !at.Before(started.Truncate(time.Second)) {
		mem[n.Name] = at
		return at, true
	}
	return time.Time{}, false
}

// leftLast is when the last of the pods being deleted is past its grace
// period (podutil.TerminatingUntil); zero when none is being deleted. The
// drain timeout counts again from then: the node waited for those pods,
// and its removal gets the time a drain gets.
func leftLast(pods []*corev1.Pod) time.Time {
	var last time.Time
	for _, p := range pods {
		if until := podutil.TerminatingUntil(p); until.After(last) {
			last = until
		}
	}
	return last
}

// names names up to three pods.
func names(pods []*corev1.Pod) string {
	var out []string
	for i, p := range pods {
		if i == 3 {
			out = append(out, "...")
			break
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return fmt.Sprint(out)
}
