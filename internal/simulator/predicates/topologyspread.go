package predicates

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// PodTopologySpread checks DoNotSchedule topology spread constraints: the
// pods a constraint selects in the node's domain, plus this pod if it
// matches, minus the smallest count over the eligible domains must not
// exceed maxSkew. Eligible domains follow nodeAffinityPolicy (default
// Honor) and nodeTaintsPolicy (default Ignore); fewer domains than
// minDomains make the minimum 0. Domains that a node group could launch a
// node into (a zone, a capacity type, a fresh hostname) count as domains
// with zero pods, so that new nodes spread too.
type PodTopologySpread struct{}

var _ Filter = PodTopologySpread{}

// kube-scheduler's PodTopologySpread reasons.
const (
	ReasonSpread             = "node(s) didn't match pod topology spread constraints"
	ReasonSpreadMissingLabel = "node(s) didn't match pod topology spread constraints (missing required label)"
)

// Name returns the filter name.
func (PodTopologySpread) Name() string { return "PodTopologySpread" }

// Filter fails nodes whose domain would exceed the allowed skew.
func (PodTopologySpread) Filter(_ *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	labels := n.Labels()
	for i := range c.Spread {
		sc := &c.Spread[i]
		v, ok := labels[sc.TopologyKey]
		if !ok {
			return failStatic(Unresolvable, ReasonSpreadMissingLabel, fmt.Sprintf("node has no %s label", sc.TopologyKey))
		}
		k := c.SpreadCounter(i)
		minMatch := k.MinMatch(sc.MinDomains)
		self := 0
		if sc.SelfMatch {
			self = 1
		}
		// No detail: this failure is common and transient while packing,
		// and formatting one would cost more than the check.
		if k.Count(sc.TopologyKey, v)+self-minMatch > int(sc.MaxSkew) {
			// A hostname is one node's domain: with the minimum pinned at
			// zero by a node group that can launch a fresh node, the node
			// stays too full while pods are only added.
			code := Unschedulable
			if sc.TopologyKey == corev1.LabelHostname && k.PinnedByPotential() {
				code = Unresolvable
			}
			return Status{Code: code, Reason: ReasonSpread, Domain: Domain{Key: sc.TopologyKey, Value: v}}
		}
	}
	return OK
}
