package snapshot

import "slices"

// openRound forks the base and marks its registries.
func (b *Base) openRound() {
	s := b.s
	b.mark = registryMark{classes: len(s.classList), counters: len(s.counters), anti: len(s.existingAnti)}
	s.Fork()
	b.open = true
}

// Release ends the round of s: on the base, it reverts every change the
// round made and drops the classes, counters, templates and limits it
// registered. On a snapshot the base did not give out, or a nil base, it
// does nothing. Defer it directly (defer base.Release(s)): when the round
// panics, a change it cut short may not be journaled, so Release drops
// the base (the next round builds anew) and lets the panic go on.
func (b *Base) Release(s *Snapshot) {
	if b == nil || !b.open || s != b.s {
		return
	}
	b.open = false
	if r := recover(); r != nil {
		b.s = nil
		panic(r)
	}
	if len(s.marks) != 1 {
		b.s = nil // a fork of the round is still open
		return
	}
	s.Revert()
	m := b.mark
	for _, c := range s.classList[m.classes:] {
		delete(s.classes, c.key)
	}
	clear(s.classList[m.classes:])
	s.classList = s.classList[:m.classes]
	for _, k := range s.counters[m.counters:] {
		delete(s.counterBySignature, k.signature)
	}
	clear(s.counters[m.counters:])
	s.counters = s.counters[:m.counters]
	s.existingAnti = s.existingAnti[:m.anti]
	for _, c := range s.classList {
		c.dropCounters(m)
	}
	for _, n := range s.Nodes {
		if len(n.elig) > m.counters {
			n.elig = n.elig[:m.counters]
		}
	}
	// What the round added past the base's lengths is not reachable, but
	// the backing arrays would keep it alive until overwritten.
	clear(s.journal[:cap(s.journal)])
	clear(s.Nodes[len(s.Nodes):cap(s.Nodes)])
	s.templates = nil
	s.launchable = nil
	clear(s.templateOff)
	clear(s.limits)
	s.clusterLimit = Limit{}
	s.addOnPods = nil
}

// dropCounters forgets the counters registered at or after the mark.
func (c *Class) dropCounters(m registryMark) {
	newer := func(k *Counter) bool { return k != nil && k.ID >= m.counters }
	c.counters = slices.DeleteFunc(c.counters, newer)
	if slices.ContainsFunc(c.spreadCounters, newer) {
		c.spreadCounters = nil
	}
	if slices.ContainsFunc(c.softCounters, newer) {
		c.softCounters = nil
	}
	if slices.ContainsFunc(c.antiCounters, newer) {
		c.antiCounters = nil
	}
	if newer(c.affinityCounter) {
		c.affinityCounter = nil
	}
	c.blocking = slices.DeleteFunc(c.blocking, newer)
	c.blockingSeen = min(c.blockingSeen, m.anti)
	if len(c.matchCache) > m.counters {
		c.matchCache = c.matchCache[:m.counters]
	}
}
