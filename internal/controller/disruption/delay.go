package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Event reasons of the wait for another controller's delay-deletion
// annotations on an emptied node.
const (
	// ReasonAwaitingDeletionDelay: the node's pods are gone and its
	// removal waits for annotations of v1alpha1.AnnotationPrefixDelayDeletion
	// to be removed.
	ReasonAwaitingDeletionDelay = "AwaitingDeletionDelay"
	// ReasonDeletionDelayTimedOut: the wait is over and the node is
	// removed with such annotations still on it.
	ReasonDeletionDelayTimedOut = "DeletionDelayTimedOut"
)

// deletionDelay decides whether the removal of a drained node with
// nothing left to evict or shutting down, its volumes waited for, waits
// for another controller: a node annotated
// delay-deletion.cluster-autoscaler.kubernetes.io/<name> is not to be
// deleted until that controller has cleaned up and removed its
// annotation, as Cluster Autoscaler honours it. The wait lasts up to
// Options.DeletionDelayTimeout from when berth first found the node so
// (written on the node, AnnotationDrainDeletionDelayed, across restarts);
// after it the node is removed all the same, with a warning. The
// annotations are read from the cache, as Cluster Autoscaler reads them
// from its lister. It returns whether to wait and the time the removal's
// drain timeout counts from.
func (c *Controller) deletionDelay(ctx context.Context, w *world, n *corev1.Node, from, started time.Time) (bool, time.Time) {
	timeout := c.opts.DeletionDelayTimeout
	at, waited := recordedClock(n, v1alpha1.AnnotationDrainDeletionDelayed, c.deletionDelayed, started)
	keys := delayKeys(n)
	if len(keys) == 0 || timeout <= 0 {
		if waited {
			return false, later(at, from)
		}
		return false, from
	}
	if !waited {
		at = c.drainClock(ctx, w, n, v1alpha1.AnnotationDrainDeletionDelayed, c.deletionDelayed, started)
	}
	if c.Clock.Since(at) < timeout {
		c.sayOnce(n, corev1.EventTypeNormal, ReasonAwaitingDeletionDelay, fmt.Sprintf(
			"The node's pods are gone; its removal waits up to %s (--node-deletion-delay-timeout) for annotation %s to be removed by the controller that set it",
			timeout, strings.Join(keys, ", ")))
		return true, from
	}
	c.warnOnce(n, ReasonDeletionDelayTimedOut, fmt.Sprintf(
		"Annotation %s still on the node %s after its removal began to wait for it; removing the node all the same", strings.Join(keys, ", "), timeout))
	return false, later(at.Add(timeout), from)
}

// delayKeys are the node's annotations of
// v1alpha1.AnnotationPrefixDelayDeletion, sorted.
func delayKeys(n *corev1.Node) []string {
	var keys []string
	for k := range n.Annotations {
		if strings.HasPrefix(k, v1alpha1.AnnotationPrefixDelayDeletion) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
