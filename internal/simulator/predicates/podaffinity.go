package predicates

import (
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// InterPodAffinity checks required pod affinity and anti-affinity of the
// incoming pod, and the anti-affinity of pods already placed against it
// (the symmetric rule). Terms select pods by labelSelector and namespaces /
// namespaceSelector, in any topology domain.
type InterPodAffinity struct{}

var _ Filter = InterPodAffinity{}

// kube-scheduler's InterPodAffinity reasons.
const (
	ReasonAffinity             = "node(s) didn't match pod affinity rules"
	ReasonAntiAffinity         = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
)

// Name returns the filter name.
func (InterPodAffinity) Name() string { return "InterPodAffinity" }

// Filter applies the three rules in kube-scheduler's order.
func (InterPodAffinity) Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	labels := n.Labels()
	if len(c.Affinity) > 0 {
		if !hasAffinityKeys(c, labels) && n.Flex == nil {
			// A node's labels do not change while pods are added: it
			// never gets the topology key.
			return failStatic(Unresolvable, ReasonAffinity, "")
		}
		if !satisfiesAffinity(c, labels, s.NamespaceLabels(c.Namespace)) {
			return fail(Unschedulable, ReasonAffinity, "")
		}
	}
	for i := range c.AntiAffinity {
		k := c.AntiCounter(i)
		if v, ok := labels[k.Key()]; ok && k.Count(k.Key(), v) > 0 {
			return fail(Unresolvable, ReasonAntiAffinity, "")
		}
	}
	for _, k := range s.BlockingAnti(c) {
		if k.Positive() == 0 {
			continue
		}
		if v, ok := labels[k.Key()]; ok && k.Count(k.Key(), v) > 0 {
			return fail(Unresolvable, ReasonExistingAntiAffinity, "")
		}
	}
	return OK
}

// hasAffinityKeys reports whether the node has every affinity term's
// topology key.
func hasAffinityKeys(c *snapshot.Class, labels map[string]string) bool {
	for i := range c.Affinity {
		if _, ok := labels[c.Affinity[i].TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// satisfiesAffinity: the node must have every term's topology key, and
// each term's domain must hold a pod matching all terms. The first pod of a
// group that selects itself may go anywhere with the keys, as long as no
// matching pod exists yet.
func satisfiesAffinity(c *snapshot.Class, labels map[string]string, nsLabels map[string]string) bool {
	k := c.AffinityCounter()
	exist := true
	for i := range c.Affinity {
		key := c.Affinity[i].TopologyKey
		v, ok := labels[key]
		if !ok {
			return false
		}
		if k.Count(key, v) <= 0 {
			exist = false
		}
	}
	if exist {
		return true
	}
	return k.Positive() == 0 && matchesOwnTerms(c, nsLabels)
}

func matchesOwnTerms(c *snapshot.Class, nsLabels map[string]string) bool {
	for i := range c.Affinity {
		if !c.Affinity[i].Matches(c.Namespace, nsLabels, c.Labels) {
			return false
		}
	}
	return true
}
