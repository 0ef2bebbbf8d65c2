package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/planner/scaledown"
)

// start taints a node and records when its drain started, in one patch
// guarded by the node's resourceVersion.
func (c *Controller) start(ctx context.Context, n *corev1.Node) error {
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[v1alpha1.AnnotationDisruptionStarted] = c.Clock.Now().UTC().Format(time.RFC3339)
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("tainting node %s: %w", n.Name, err)
	}
	c.checked[n.Name] = true
	delete(c.removableSince, n.Name)
	log.FromContext(ctx).Info("draining node to remove it", "node", n.Name, "nodeGroup", n.Labels[v1alpha1.LabelNodeGroup])
	c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonDisrupting, "ScaleDown",
		"Removing node: its pods fit on the other nodes; tainted %s and evicting its pods", v1alpha1.TaintDisrupted)
	return nil
}

// advance moves a drain on: after a restart it checks that the node is
// still removable; it gives up after the drain timeout; it evicts the pods
// that must move; and it deletes the node when none is left.
func (c *Controller) advance(ctx context.Context, w *world, n *corev1.Node, res *Result) error {
	g := w.groups[n.Labels[v1alpha1.LabelNodeGroup]]
	if g == nil || n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(g.UID) || n.DeletionTimestamp != nil || c.deleted[n.Name] {
		return nil // not berth's to drain (a taint copied by hand), or going already
	}
	if !c.checked[n.Name] {
		blocked, err := scaledown.Recheck(w.input, n.Name)
		if err != nil {
			return err
		}
		if blocked != nil {
			res.GivenUp = append(res.GivenUp, n.Name)
			return c.stop(ctx, n, ReasonDrainStopped, "Drain stopped after a restart: "+blocked.Message)
		}
		c.checked[n.Name] = true
	}
	started, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationDisruptionStarted])
	if err != nil {
		started = c.Clock.Now() // a taint without its start: count from now
	}
	if timeout := g.Spec.Disruption.Timeout(); c.Clock.Since(started) > timeout {
		drainTimeouts.WithLabelValues(g.Name).Inc()
		res.GivenUp = append(res.GivenUp, n.Name)
		return c.stop(ctx, n, ReasonDrainTimedOut, fmt.Sprintf("Drain did not finish within %s (pods still to evict: %s); the node stays", timeout, c.remaining(w, n)))
	}
	left := 0
	for _, p := range w.podsOn[n.Name] {
		if !mustMove(p) {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue // terminating: wait for it
		}
		if err := c.evict(ctx, p); err != nil {
			return err
		}
	}
	if left > 0 {
		return nil
	}
	// Only pods that go with the node are left: delete it. Check the owner
	// mark again right before, on the object the decision was made on.
	if err := c.Cloud.Delete(ctx, n.Name); err != nil && !cloudprovider.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", n.Name, err)
	}
	c.deleted[n.Name] = true
	drainDuration.Observe(c.Clock.Since(started).Seconds())
	removed.WithLabelValues(g.Name).Inc()
	delete(c.checked, n.Name)
	res.Removed = append(res.Removed, n.Name)
	log.FromContext(ctx).Info("removed node", "node", n.Name, "nodeGroup", g.Name, "drain", c.Clock.Since(started).Round(time.Second).String())
	c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonRemoved, "ScaleDown", "Node removed after %s: all its pods moved", c.Clock.Since(started).Round(time.Second))
	return nil
}

// evict asks the API server to evict a pod. Placeholders (berth's own
// headroom pods) are deleted: they are planned again. A refusal by a
// PodDisruptionBudget (429) is retried next round, never forced.
func (c *Controller) evict(ctx context.Context, p *corev1.Pod) error {
	logger := log.FromContext(ctx).WithValues("pod", client.ObjectKeyFromObject(p), "node", p.Spec.NodeName)
	if p.Labels[v1alpha1.LabelHeadroomRole] != "" && p.Namespace == v1alpha1.SystemNamespace {
		return client.IgnoreNotFound(c.Client.Delete(ctx, p))
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	err := c.Client.SubResource("eviction").Create(ctx, p, ev)
	switch {
	case err == nil:
		logger.V(1).Info("evicted pod")
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsTooManyRequests(err):
		logger.V(1).Info("eviction refused by a PodDisruptionBudget; retrying next round", "error", err.Error())
		return nil
	default:
		logger.Info("could not evict pod; retrying next round", "error", err.Error())
		return nil
	}
}

// stop removes the taint and the start annotation: the node stays.
func (c *Controller) stop(ctx context.Context, n *corev1.Node, reason, msg string) error {
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != v1alpha1.TaintDisrupted {
			taints = append(taints, t)
		}
	}
	n.Spec.Taints = taints
	delete(n.Annotations, v1alpha1.AnnotationDisruptionStarted)
	delete(n.Annotations, v1alpha1.AnnotationReplacedBy)
	delete(n.Annotations, v1alpha1.AnnotationReplacementStarted)
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("untainting node %s: %w", n.Name, err)
	}
	delete(c.checked, n.Name)
	log.FromContext(ctx).Info("drain stopped; node stays", "node", n.Name, "reason", reason, "message", msg)
	c.Recorder.Eventf(n, nil, corev1.EventTypeWarning, reason, "ScaleDown", "%s", msg)
	return nil
}

// remaining names up to three pods still to evict from a node.
func (c *Controller) remaining(w *world, n *corev1.Node) string {
	var names []string
	for _, p := range w.podsOn[n.Name] {
		if mustMove(p) {
			if len(names) == 3 {
				names = append(names, "...")
				break
			}
			names = append(names, p.Namespace+"/"+p.Name)
		}
	}
	return fmt.Sprint(names)
}
