package launchtimeout

import (
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// Caps on what the launch timeout may delete, so that whatever makes many
// nodes NotReady together (a partition, a control-plane outage, a bad
// rollout of the node image) costs a few nodes, not a fleet.
const (
	// CapWindow is the window the caps count deletions in.
	CapWindow = time.Minute
	// MaxPerWindow caps deletions in all node groups per CapWindow.
	MaxPerWindow = 3
	// MaxGroupShare caps deletions in one node group per CapWindow, as a
	// share of its nodes (at least one).
	MaxGroupShare = 0.2
	// PartitionShare and PartitionMinNodes: when more than this share of
	// a group's nodes that were Ready once, and more than this many, are
	// NotReady, the group is partitioned, and its never-Ready nodes are
	// not taken for failed launches. Cluster Autoscaler calls a cluster
	// unhealthy past 3 unready nodes and 45 %: one dead node of a small
	// group is no partition (it held the group's hung launches for ever).
	PartitionShare    = 0.5
	PartitionMinNodes = 3
)

// caps counts recent deletions; safe for concurrent use. Memory only: a
// restart forgets them, which lets through at most one more window's worth.
type caps struct {
	mu      sync.Mutex
	all     []time.Time
	byGroup map[string][]time.Time
	// tried are the nodes whose deletion was decided (and counted): a
	// deletion the provider refused is retried without taking another
	// slot. Dropped when the node is gone (done).
	tried map[string]bool
}

// decided reports whether node's deletion was decided (and counted)
// already: a retry.
func (c *caps) decided(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tried[node]
}

// done forgets node (it is gone).
func (c *caps) done(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tried, node)
}

// allow reports whether one more node of the group may be deleted now,
// given the group's nodes, or why not.
func (c *caps) allow(now time.Time, group string, nodes []corev1.Node) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(now)
	total, wasReady, lost := 0, 0, 0
	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp != nil || nodeutil.Standby(n) || nodeutil.Resuming(n, now) {
			continue // a standby node is NotReady by design, a resumed one until it boots
		}
		total++
		if n.Labels[v1alpha1.LabelInitialized] == "true" {
			wasReady++
			if !nodeutil.Ready(n) {
				lost++
			}
		}
	}
	if lost > PartitionMinNodes && float64(lost) > PartitionShare*float64(wasReady) {
		return false, fmt.Sprintf("%d of the %d nodes of node group %s that were Ready are NotReady: that is a partition or an outage, not failed launches; no node of the group is deleted for its launch",
			lost, wasReady, group)
	}
	if len(c.all) >= MaxPerWindow {
		return false, fmt.Sprintf("the launch timeout deleted %d nodes in the last %s, its limit", len(c.all), CapWindow)
	}
	// The share of the group as it was before this window's deletions.
	limit := max(1, int(math.Floor(MaxGroupShare*float64(total+len(c.byGroup[group])))))
	if len(c.byGroup[group]) >= limit {
		return false, fmt.Sprintf("the launch timeout deleted %d of node group %s's %d nodes in the last %s, its limit (%.0f %%)",
			len(c.byGroup[group]), group, total, CapWindow, 100*MaxGroupShare)
	}
	return true, ""
}

// record counts the deletion of node, once.
func (c *caps) record(now time.Time, group, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byGroup == nil {
		c.byGroup, c.tried = map[string][]time.Time{}, map[string]bool{}
	}
	c.tried[node] = true
	c.all = append(c.all, now)
	c.byGroup[group] = append(c.byGroup[group], now)
}

func (c *caps) forget(now time.Time) {
	keep := func(ts []time.Time) []time.Time {
		out := ts[:0]
		for _, t := range ts {
			if now.Sub(t) < CapWindow {
				out = append(out, t)
			}
		}
		return out
	}
	c.all = keep(c.all)
	for g, ts := range c.byGroup {
		if c.byGroup[g] = keep(ts); len(c.byGroup[g]) == 0 {
			delete(c.byGroup, g)
		}
	}
}
