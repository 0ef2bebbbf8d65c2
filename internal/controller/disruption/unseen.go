package disruption

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/internal/nodeutil"
)

// unseenFor is how long a taint this replica wrote or took off is laid
// over a cache that does not show it: past it, the write is taken for
// overtaken by another's (the taint taken off by hand since).
const unseenFor = 30 * time.Second

// unseenWrite is a taint this replica wrote on a node (tainted) or took
// off, the node as the write returned it, and when it was made.
type unseenWrite struct {
	node    *corev1.Node
	tainted bool
	at      time.Time
}

// wrote records a taint written on (tainted) or taken off a node, as the
// patch returned it.
func (c *Controller) wrote(n *corev1.Node, tainted bool) {
	c.unseen[n.Name] = unseenWrite{node: n.DeepCopy(), tainted: tainted, at: c.Clock.Now()}
}

// overlayOwnWrites lays over the round's nodes (read from the cache) the
// taints this replica wrote or took off in an earlier round that the
// cache does not show yet, with the labels and annotations written with
// them (as ensureMarks lays its marks), and forgets the writes the cache
// shows. Planned on the cache alone, a round counted a node it drains as
// none (and started more drains than the budget allows, or counted it as
// a home for others' pods), or evicted the pods of a node whose drain it
// had given up.
func (c *Controller) overlayOwnWrites(ctx context.Context, w *world) {
	for name, u := range c.unseen {
		n := w.byName[name]
		if n == nil || n.ResourceVersion == u.node.ResourceVersion || nodeutil.Disrupted(n) == u.tainted || c.Clock.Since(u.at) > unseenFor {
			delete(c.unseen, name)
			continue
		}
		log.FromContext(ctx).V(1).Info("the cache does not show the node's taint as berth wrote it yet; the round reads it as written", "node", name, "tainted", u.tainted)
		own := w.own(n)
		own.Spec.Taints = slices.Clone(u.node.Spec.Taints)
		own.Labels, own.Annotations = maps.Clone(u.node.Labels), maps.Clone(u.node.Annotations)
	}
}
