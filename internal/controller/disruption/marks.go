package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// mark is what this replica writes on a node right after it launched
// nodes for it: a replacement's marks (replaced-by, when, why) or the
// start of the node's drain (drain: the disrupted taint, with its
// annotations). The informer cache shows the write a moment later, or
// never when the write lost a conflict with a kubelet's status update; a
// round that read the node without it would plan the node again and
// launch its replacements a second time. So the marks are kept (Controller.marks)
// until the cache shows them, and each round first makes sure the API
// server has them (ensureMarks).
type mark struct {
	at          time.Time
	annotations map[string]string
	drain       bool
}

// markRewrite is how long after its write a mark the cache does not show
// is written again: a few rounds, each retrying a write that lost a
// conflict.
const markRewrite = time.Minute

// on reports whether n carries the mark.
func (m mark) on(n *corev1.Node) bool {
	for k := range m.annotations {
		if n.Annotations[k] == "" {
			return false
		}
	}
	return !m.drain || nodeutil.Disrupted(n)
}

// apply writes the mark on n, in place.
func (m mark) apply(n *corev1.Node) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for k, v := range m.annotations {
		n.Annotations[k] = v
	}
	delete(n.Annotations, v1alpha1.AnnotationReplacementLaunching) // the mark names what was launched
	if m.drain && !nodeutil.Disrupted(n) {
		n.Spec.Taints = append(n.Spec.Taints, disruptedTaint)
		nodeutil.ExcludeFromLoadBalancers(n)
	}
}

// ensureMarks runs first in a round, for the nodes whose marks the
// informer cache does not show yet: the node is read from the API server,
// marked again if the mark is not there (its write failed), and the round
// reads it with the mark. A node the API server no longer has, or the
// cache shows marked, is forgotten; a mark older than markRewrite is
// not written again (only while its first write may have failed, so that
// a drain stopped since, by the node group's finalizer or `berth
// cleanup`, is not started again) but forgotten once the API server does
// not show it. While a node's mark is not confirmed, it stays in marks
// and nothing more is launched or drained for it.
func (c *Controller) ensureMarks(ctx context.Context, w *world) []error {
	var errs []error
	for name, m := range c.marks {
		n := w.byName[name]
		if n == nil || m.on(n) {
			delete(c.marks, name)
			continue
		}
		fresh := &corev1.Node{}
		if err := c.APIReader.Get(ctx, client.ObjectKey{Name: name}, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				delete(c.marks, name)
				continue
			}
			errs = append(errs, fmt.Errorf("reading node %s to confirm its marks: %w", name, err))
			continue
		}
		if !m.on(fresh) && c.Clock.Since(m.at) > markRewrite {
			delete(c.marks, name) // not written again: a drain stopped since stays stopped
			continue
		}
		if !m.on(fresh) {
			patch := client.MergeFromWithOptions(fresh.DeepCopy(), client.MergeFromWithOptimisticLock{})
			m.apply(fresh)
			if err := c.Client.Patch(ctx, fresh, patch); err != nil {
				errs = append(errs, fmt.Errorf("marking node %s again: %w", name, err))
				continue
			}
		}
		m.apply(w.own(n))
	}
	return errs
}
