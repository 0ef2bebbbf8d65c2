package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Prepare registers the counters the filters need to evaluate pods of class
// c (its spread constraints, pod affinity and anti-affinity). It is cheap
// after the first call for a class.
func (s *Snapshot) Prepare(c *Class) {
	if len(c.Spread) > 0 && c.spreadCounters == nil {
		c.spreadCounters = make([]*Counter, len(c.Spread))
		keys := spreadKeysID(c)
		for i := range c.Spread {
			c.spreadCounters[i] = s.counter(&Counter{kind: kindSpread, owner: c, term: i, key: c.Spread[i].TopologyKey, signature: spreadID(c, i, keys)})
		}
	}
	if len(c.SoftSpread) > 0 && c.softCounters == nil {
		c.softCounters = make([]*Counter, len(c.SoftSpread))
		for i := range c.SoftSpread {
			sc := &c.SoftSpread[i]
			c.softCounters[i] = s.counter(&Counter{kind: kindSoftSpread, owner: c, term: i, key: sc.TopologyKey,
				signature: fmt.Sprintf("soft|%s|%s|%s", c.Namespace, sc.Selector.String(), sc.TopologyKey)})
		}
	}
	if len(c.Affinity) > 0 && c.affinityCounter == nil {
		ids := make([]string, len(c.Affinity))
		for i := range c.Affinity {
			ids[i] = c.Affinity[i].signature
		}
		c.affinityCounter = s.counter(&Counter{kind: kindAffinity, owner: c, signature: "affinity|" + strings.Join(ids, "&")})
	}
	if len(c.AntiAffinity) > 0 && c.antiCounters == nil {
		c.antiCounters = make([]*Counter, len(c.AntiAffinity))
		for i := range c.AntiAffinity {
			t := &c.AntiAffinity[i]
			c.antiCounters[i] = s.counter(&Counter{kind: kindAnti, owner: c, term: i, key: t.TopologyKey, signature: "anti|" + t.signature})
		}
	}
}

// spreadID identifies what a spread counter counts: the selector and
// namespace, the key, and everything that decides which nodes are domains
// (all of the class's keys, and node selection and tolerations: the
// policies may honour them for nodes, and a template no pending pod of
// the round wants is a potential domain only for the classes that can
// use it, potentialFrom).
// keys is spreadKeysID(c), worked out once for all of the class's spreads.
func spreadID(c *Class, i int, keys string) string {
	sc := &c.Spread[i]
	id := fmt.Sprintf("spread|%s|%s|%s|%s|%s|%s", c.Namespace, sc.Selector.String(), sc.TopologyKey,
		sc.NodeAffinityPolicy, sc.NodeTaintsPolicy, keys)
	return id + "|" + c.nodeSelection + "|" + c.tolerationsID
}

// spreadKeysID names the set of the class's spread keys in a fixed
// length: a digest of them sorted, once for the class. Each counter's id
// holds it, and a pod may carry thousands of spreads (the API server sets
// no maximum): the keys themselves in every id made the ids, and the work
// to build them, grow with the square of the spreads (8,000 spreads: 7 s
// and 700 MB a round).
func spreadKeysID(c *Class) string {
	keys := make([]string, len(c.Spread))
	for j := range c.Spread {
		keys[j] = c.Spread[j].TopologyKey
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// counter returns the registered counter with k's id, or registers k.
func (s *Snapshot) counter(k *Counter) *Counter {
	if have := s.counterBySignature[k.signature]; have != nil {
		return have
	}
	s.counterBySignature[k.signature] = k
	return s.register(k)
}

// registerExistingAnti registers, for a class whose pods carry required
// anti-affinity terms, the counters that keep other pods out of the
// domains those pods run in (the symmetric anti-affinity rule).
func (s *Snapshot) registerExistingAnti(c *Class) {
	c.existingAnti = make([]*Counter, len(c.AntiAffinity))
	for i := range c.AntiAffinity {
		t := &c.AntiAffinity[i]
		sig := "existing-anti|" + t.signature
		fresh := s.counterBySignature[sig] == nil
		k := s.counter(&Counter{kind: kindExistingAnti, owner: c, term: i, key: t.TopologyKey, signature: sig})
		c.existingAnti[i] = k
		if fresh {
			s.existingAnti = append(s.existingAnti, k)
		}
	}
}

// register adds a counter and fills it from the current state.
func (s *Snapshot) register(k *Counter) *Counter {
	k.ID = len(s.counters)
	k.pairs = map[topologyPair]int{}
	s.counters = append(s.counters, k)
	matched := false
	for _, c := range s.classList {
		if k.matches(s, c) {
			c.counters = append(c.counters, k)
			matched = matched || c.placed > 0
		}
	}
	if k.kind == kindSpread {
		k.domainNodes = map[string]int{}
		if k.key == corev1.LabelHostname {
			k.domainNodes = make(map[string]int, len(s.Nodes)) // a domain per node: no growing
		}
		s.addEligibleDomains(k)
		k.resetPotential(s)
	}
	if !matched {
		return k // no pod of a class it counts is placed
	}
	for _, n := range s.Nodes {
		if !k.eligible(n) {
			continue
		}
		for _, p := range n.Pods {
			if k.matches(s, p.Class) {
				k.count(n, 1)
			}
		}
	}
	return k
}

// SpreadCounter returns the counter of a class's i-th spread constraint
// (after Prepare).
func (c *Class) SpreadCounter(i int) *Counter { return c.spreadCounters[i] }

// SoftCounter returns the counter of a class's i-th ScheduleAnyway spread
// constraint (after Prepare).
func (c *Class) SoftCounter(i int) *Counter { return c.softCounters[i] }

// AffinityCounter returns the counter of pods matching all of a class's
// affinity terms (after Prepare).
func (c *Class) AffinityCounter() *Counter { return c.affinityCounter }

// AntiCounter returns the counter of a class's i-th anti-affinity term
// (after Prepare).
func (c *Class) AntiCounter(i int) *Counter { return c.antiCounters[i] }

// BlockingAnti returns, for an incoming class, the counters of the
// anti-affinity terms carried by other classes' pods that match it: it may
// not join a domain where such a counter is positive. The list is cached
// per class and extended when new classes with anti-affinity appear.
func (s *Snapshot) BlockingAnti(c *Class) []*Counter {
	nsLabels := s.namespaces[c.Namespace]
	for ; c.blockingSeen < len(s.existingAnti); c.blockingSeen++ {
		k := s.existingAnti[c.blockingSeen]
		if k.owner.AntiAffinity[k.term].Matches(c.Namespace, nsLabels, c.Labels) {
			c.blocking = append(c.blocking, k)
		}
	}
	return c.blocking
}

// Term returns the anti-affinity term an existing-anti counter is for.
func (k *Counter) Term() *AffinityTerm { return &k.owner.AntiAffinity[k.term] }

// Key returns the counter's topology key.
func (k *Counter) Key() string { return k.key }

// Counts reports whether counter k counts the pods of class c.
func (s *Snapshot) Counts(k *Counter, c *Class) bool { return k.matches(s, c) }

// Eligible reports whether counter k counts the pods on node n.
func (k *Counter) Eligible(n *Node) bool { return k.eligible(n) }

// addEligibleDomains registers the domains of spread counter k's eligible
// nodes. Existing nodes of one shape have the same value of every label
// but the hostname, and are eligible alike unless the owner's node
// selection names nodes: they are registered a shape at a time, and for
// the hostname, when every shape is eligible, as a copy of the snapshot's
// map of hostnames. O(shapes + nodes) with a label lookup per shape, or
// a map copy.
func (s *Snapshot) addEligibleDomains(k *Counter) {
	if k.owner.NamesNodes {
		for _, n := range s.Nodes {
			if k.eligible(n) {
				k.addDomain(n.Labels()[k.key])
			}
		}
		return
	}
	if k.key != corev1.LabelHostname {
		for _, idx := range s.shapes.nodes {
			if len(idx) > 0 {
				if n := s.Nodes[idx[0]]; k.eligible(n) {
					k.addDomains(n.Labels()[k.key], len(idx))
				}
			}
		}
	} else if !s.addHostnames(k) {
		for _, idx := range s.shapes.nodes {
			if len(idx) > 0 && k.eligible(s.Nodes[idx[0]]) {
				for _, i := range idx {
					k.addDomain(s.Nodes[i].Labels()[k.key])
				}
			}
		}
	}
	for _, n := range s.Nodes {
		if n.Shape == 0 && k.eligible(n) {
			k.addDomain(n.Labels()[k.key])
		}
	}
}

// addHostnames registers every existing node as a domain of hostname
// counter k at once, when every shape is eligible and k counts nothing
// yet (each domain then holds no pod). It reports whether it did.
func (s *Snapshot) addHostnames(k *Counter) bool {
	if len(k.domainNodes) > 0 || len(k.pairs) > 0 {
		return false
	}
	for _, idx := range s.shapes.nodes {
		if len(idx) > 0 && !k.eligible(s.Nodes[idx[0]]) {
			return false
		}
	}
	h := s.hostnames()
	if len(h) == 0 {
		return true
	}
	k.domainNodes = maps.Clone(h)
	k.hist = append(k.hist[:0], len(k.domainNodes))
	k.min = 0
	return true
}

// hostnames counts the existing nodes per hostname label value, kept
// until an existing node comes or goes. The map must not be changed.
func (s *Snapshot) hostnames() map[string]int {
	sh := &s.shapes
	if sh.hostnames == nil || sh.hostnamesOf != sh.version {
		sh.hostnames = map[string]int{}
		for _, idx := range sh.nodes {
			for _, i := range idx {
				if v, ok := s.Nodes[i].Labels()[corev1.LabelHostname]; ok {
					sh.hostnames[v]++
				}
			}
		}
		sh.hostnamesOf = sh.version
	}
	return sh.hostnames
}
