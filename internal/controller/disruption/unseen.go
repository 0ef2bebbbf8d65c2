package disruption

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/internal/nodeutil"
)

// unseenFor is how long a round waits for the cache to show a taint this
// replica wrote or took off: past it, the write is taken for overtaken by
// another's (the taint taken off by hand since) and no longer waited for.
const unseenFor = 30 * time.Second

// unseenWrite is a taint this replica wrote on a node (tainted) or took
// off, with the resourceVersion the write returned and when it was made.
type unseenWrite struct {
	rv      string
	tainted bool
	at      time.Time
}

// wrote records a taint written on (tainted) or taken off a node, as the
// patch returned it.
func (c *Controller) wrote(n *corev1.Node, tainted bool) {
	c.unseen[n.Name] = unseenWrite{rv: n.ResourceVersion, tainted: tainted, at: c.Clock.Now()}
}

// ownWritesUnseen reports whether the round's nodes (read from the cache)
// miss a taint this replica wrote or took off in an earlier round, and
// forgets the writes they show. Planned on such a view, a round would
// count a node it drains as none (and start more drains than the budget
// allows, or count it as a home for others' pods), or evict the pods of
// a node whose drain it gave up: the round waits for the cache instead.
func (c *Controller) ownWritesUnseen(ctx context.Context, w *world) bool {
	waiting := false
	for name, u := range c.unseen {
		n := w.byName[name]
		if n == nil || n.ResourceVersion == u.rv || nodeutil.Disrupted(n) == u.tainted || c.Clock.Since(u.at) > unseenFor {
			delete(c.unseen, name)
			continue
		}
		log.FromContext(ctx).V(1).Info("the cache does not show the node's taint as berth wrote it yet; the round waits", "node", name, "tainted", u.tainted)
		waiting = true
	}
	return waiting
}
