package disruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// cancelStaleRemovals undoes the removals a provider holds half-done for
// nodes berth no longer drains (a Cluster API Machine marked whose drain
// was given up, or whose replica change failed before a restart), before
// any new removal: a mark left behind would make a later removal in the
// same group take out a node that was never simulated. Removals that went
// too far to be undone are left to finish. Errors are per group and node;
// the round goes on.
func (c *Controller) cancelStaleRemovals(ctx context.Context, w *world) []error {
	rc, ok := c.Cloud.(cloudprovider.RemovalCanceler)
	if !ok {
		return nil
	}
	var errs []error
	for _, g := range w.input.NodeGroups {
		if g.Spec.Provider.ClusterAPI == nil && g.Spec.Provider.KWOK == nil {
			continue // no provider: nothing of berth's there
		}
		names, err := rc.Removing(ctx, g)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the removals node group %s holds: %w", g.Name, err))
			continue
		}
		for _, name := range names {
			n := w.byName[name]
			if n == nil {
				// No Node: a Machine the provisioner removes because it never
				// got infrastructure, or a node whose removal went on past its
				// deletion. No drain of berth's to undo.
				continue
			}
			if n.DeletionTimestamp == nil && (nodeutil.Disrupted(n) || removedByAnother(n)) {
				continue // its drain goes on, or another controller's removal
			}
			err := rc.CancelRemoval(ctx, name)
			switch {
			case cloudprovider.IsRemovalCommitted(err):
				log.FromContext(ctx).V(1).Info("a removal berth no longer drains for cannot be undone; it finishes", "node", name, "error", err.Error())
			case err != nil:
				errs = append(errs, fmt.Errorf("undoing the removal of %s: %w", name, err))
			default:
				log.FromContext(ctx).Info("undid a removal the provider held for a node berth no longer drains", "node", name, "nodeGroup", g.Name)
				c.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonRemovalCancelled, "ScaleDown",
					"Undid the provider's removal of this node (node group %s): berth no longer drains it", g.Name)
			}
		}
	}
	return errs
}

// removedByAnother reports whether a node's removal is another
// controller's, not a drain's: the launch timeout removes nodes never
// Ready (without the initialized label; a drain never starts on one but
// for an interruption, which taints it), the standby controller the
// standby nodes it marked. Each retries its own removal until the
// provider finishes it; undone here, the two would undo each other's
// work every round, and an undo racing the other's replica change could
// leave the replicas lowered for no mark.
func removedByAnother(n *corev1.Node) bool {
	return n.Labels[v1alpha1.LabelInitialized] != "true" || n.Annotations[v1alpha1.AnnotationStandbyRemoving] != ""
}
