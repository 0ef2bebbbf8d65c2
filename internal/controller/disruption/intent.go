package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// intend records on each of the nodes, before a replacement is launched
// for them, that one is being launched (AnnotationReplacementLaunching):
// a controller that stops between the launch and the replaced-by mark
// leaves the record, and the next one does not launch a second
// replacement while the first may be booting (launching). Nothing is
// launched when a record cannot be written; the records written are
// taken off again.
func (c *Controller) intend(ctx context.Context, w *world, names []string) error {
	now := c.Clock.Now().UTC().Format(time.RFC3339)
	for _, name := range names {
		n := w.byName[name]
		if n == nil {
			c.forgetIntent(ctx, w, names)
			return fmt.Errorf("node %s to replace is gone", name)
		}
		n = w.own(n)
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[v1alpha1.AnnotationReplacementLaunching] = now
		if err := c.Client.Patch(ctx, n, patch); err != nil {
			delete(n.Annotations, v1alpha1.AnnotationReplacementLaunching)
			c.forgetIntent(ctx, w, names)
			return fmt.Errorf("recording on node %s that its replacement is being launched: %w", name, err)
		}
	}
	return nil
}

// forgetIntent takes the record of intend off the nodes after a launch
// that failed, so that the next round plans again. Best effort: a record
// left behind stops counting after the max provision time.
func (c *Controller) forgetIntent(ctx context.Context, w *world, names []string) {
	for _, name := range names {
		n := w.byName[name]
		if n == nil || n.Annotations[v1alpha1.AnnotationReplacementLaunching] == "" {
			continue
		}
		n = w.own(n)
		patch := client.MergeFrom(n.DeepCopy())
		delete(n.Annotations, v1alpha1.AnnotationReplacementLaunching)
		if err := c.Client.Patch(ctx, n, patch); err != nil {
			log.FromContext(ctx).Info("could not take the record of a replacement's launch off the node; it stops counting after the max provision time",
				"node", name, "error", err.Error())
		}
	}
}

// launching reports whether a replacement may be booting for n that no
// mark names (nodeutil.ReplacementLaunching).
func (c *Controller) launching(n *corev1.Node) bool {
	return nodeutil.ReplacementLaunching(n, c.Clock.Now(), c.maxProvisionTime())
}
