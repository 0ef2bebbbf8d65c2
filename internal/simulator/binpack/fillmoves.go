package binpack

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// What a move of fill may change. kube-scheduler checks a pod with the
// pods placed before it; moving a pod changes the counts the required
// pod affinity and spread of other placed pods read. fill keeps every
// count by a key wider than a node (a zone) as it is, by moving a pod
// that such a count reads only within its domain of that key; counts by
// hostname change on the two nodes alone, so it checks the pods of those
// two nodes, and that no spread's smallest domain shrank.

// watcher is a required affinity or spread counter of a placed pending
// pod's class, with the topology keys it counts by.
type watcher struct {
	k      *snapshot.Counter
	keys   []string
	spread bool
}

// watch lists the classes of placed pending pods with required pod
// affinity or spread, and the keys wider than a node they count by.
func (f *filler) watch() {
	seen := map[*snapshot.Class]bool{}
	keys := map[string]bool{}
	counters := map[*snapshot.Counter]bool{}
	for _, pod := range f.p.pending {
		c := pod.Class
		if pod.Node == nil || !dependsOnOthers(c) || seen[c] {
			continue
		}
		seen[c] = true
		if len(c.Affinity) > 0 {
			w := watcher{k: c.AffinityCounter()}
			for i := range c.Affinity {
				keys[c.Affinity[i].TopologyKey] = true
				w.keys = append(w.keys, c.Affinity[i].TopologyKey)
			}
			f.addWatcher(w, counters)
		}
		for i := range c.Spread {
			keys[c.Spread[i].TopologyKey] = true
			f.addWatcher(watcher{k: c.SpreadCounter(i), keys: []string{c.Spread[i].TopologyKey}, spread: true}, counters)
		}
	}
	delete(keys, corev1.LabelHostname)
	f.keys = slices.Sorted(maps.Keys(keys))
}

// addWatcher adds w to the watchers, once per counter.
func (f *filler) addWatcher(w watcher, counters map[*snapshot.Counter]bool) {
	if !counters[w.k] {
		counters[w.k] = true
		f.all = append(f.all, w)
	}
}

// wide reports whether a watcher counts pods of class c by a key wider
// than a node.
func (f *filler) wide(c *snapshot.Class) bool {
	for _, w := range f.watchersOf(c) {
		for _, k := range w.keys {
			if k != corev1.LabelHostname {
				return true
			}
		}
	}
	return false
}

// domainsOf names the domains of node n for the keys wider than a node
// that watchers count by: nodes with equal names are in the same domains.
func (f *filler) domainsOf(n *snapshot.Node) string {
	if d, ok := f.domains[n]; ok {
		return d
	}
	var b strings.Builder
	for _, k := range f.keys {
		v, ok := n.Labels()[k]
		if ok {
			b.WriteString(v)
		}
		b.WriteByte(0)
	}
	f.domains[n] = b.String()
	return f.domains[n]
}

// move moves pod from its node to planned node to if it passes the
// filters there, to then costs at most maxPrice, and every placed pending
// pod that counts it (required affinity or spread) is still accepted
// where it is.
func (f *filler) move(pod *snapshot.Pod, to *snapshot.Node, maxPrice float64) bool {
	p, from := f.p, pod.Node
	ws := f.watchersOf(pod.Class)
	if !sameDomains(ws, from, to) || f.stuckIn(pod.Class, to) {
		return false
	}
	mins := make([]int, len(ws))
	for i, w := range ws {
		mins[i] = w.k.MinMatch(0)
	}
	moved := false
	_ = p.s.WithFork(func() (bool, error) {
		p.s.RemovePod(pod)
		if st := predicates.Run(p.in.Filters, p.s, pod.Class, to); st.Failed() {
			f.noteStuck(pod, st.Domain)
			return false, nil
		}
		p.s.AddPod(pod, to)
		if to.Current.Price > maxPrice+minSaving {
			return false, nil
		}
		for i, w := range ws {
			if w.spread && w.k.MinMatch(0) < mins[i] {
				return false, nil // a spread's smallest domain shrank
			}
		}
		moved = f.neighboursHold(pod, from, to)
		return moved, nil
	})
	return moved
}

// stuck is a class and a domain its pods may not move within.
type stuck struct {
	class  int
	domain string
}

// noteStuck records a move of pod that failed for every node of a domain
// wider than a node (a spread's domain too full): the pods of its class
// are not tried within that domain again while the filler lasts (both
// passes of a fill, or a stepDown). Every pod a count by such a key reads
// moves only within its domain (sameDomains), so the counts the failure
// read stay as they are; a change that would let a pod move after all
// (a node retired, a template back) is missed, and no move is made that
// should not be. On BenchmarkPlan at 1,000 pods most of the moves the
// passes tried failed so, over and over (docs/performance.md).
func (f *filler) noteStuck(pod *snapshot.Pod, d predicates.Domain) {
	if d.Key == "" || d.Key == corev1.LabelHostname {
		return
	}
	if k, ok := f.stuckKey[pod.Class.ID]; ok && k != d.Key {
		return // one key per class: the first seen
	}
	f.stuckKey[pod.Class.ID] = d.Key
	f.stuck[stuck{pod.Class.ID, d.Value}] = true
}

// stuckIn reports whether pods of c are known not to move within n's
// domain (noteStuck).
func (f *filler) stuckIn(c *snapshot.Class, n *snapshot.Node) bool {
	key, ok := f.stuckKey[c.ID]
	return ok && f.stuck[stuck{c.ID, n.Labels()[key]}]
}

// sameDomains reports whether moving a pod from one node to the other
// leaves every count the watchers keep by a key wider than a node as it
// is: both nodes are in the same domain of that key, and counted alike.
// Counts by hostname change, and neighboursHold checks the pods they
// concern.
func sameDomains(ws []watcher, from, to *snapshot.Node) bool {
	for _, w := range ws {
		if w.spread && w.k.Eligible(from) != w.k.Eligible(to) {
			return false
		}
		for _, key := range w.keys {
			if key == corev1.LabelHostname {
				continue
			}
			a, okA := from.Labels()[key]
			b, okB := to.Labels()[key]
			if a != b || okA != okB {
				return false
			}
		}
	}
	return true
}

// neighboursHold reports whether, with pod moved from one node to the
// other, the pods next to it still fit: on to, those whose affinity or
// spread counts it (a node's count grew); on from, those whose required
// affinity counts it (a node lost a pod they may have needed).
func (f *filler) neighboursHold(pod *snapshot.Pod, from, to *snapshot.Node) bool {
	for _, q := range to.Pods {
		if q != pod && dependsOnOthers(q.Class) && f.counts(q.Class, pod.Class, true) && !f.p.fitsWithout(q) {
			return false
		}
	}
	for _, q := range from.Pods {
		if len(q.Class.Affinity) > 0 && f.counts(q.Class, pod.Class, false) && !f.p.fitsWithout(q) {
			return false
		}
	}
	return true
}

// counts reports whether the required affinity of class c (and, with
// spread, its spread constraints) counts pods of class m.
func (f *filler) counts(c, m *snapshot.Class, spread bool) bool {
	if len(c.Affinity) > 0 && f.p.s.Counts(c.AffinityCounter(), m) {
		return true
	}
	if spread {
		for i := range c.Spread {
			if f.p.s.Counts(c.SpreadCounter(i), m) {
				return true
			}
		}
	}
	return false
}

// watchersOf returns the watchers that count pods of class m.
func (f *filler) watchersOf(m *snapshot.Class) []watcher {
	if ws, ok := f.watchers[m.ID]; ok {
		return ws
	}
	var ws []watcher
	for _, w := range f.all {
		if f.p.s.Counts(w.k, m) {
			ws = append(ws, w)
		}
	}
	f.watchers[m.ID] = ws
	return ws
}
