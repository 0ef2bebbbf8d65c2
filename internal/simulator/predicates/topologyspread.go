package predicates

import (
	"fmt"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// PodTopologySpread checks DoNotSchedule topology spread constraints: the
// pods a constraint selects in the node's domain, plus this pod if it
// matches, minus the smallest count over the eligible domains must not
// exceed maxSkew. Eligible domains follow nodeAffinityPolicy (default
// Honor) and nodeTaintsPolicy (default Ignore); fewer domains than
// minDomains make the minimum 0. Zones that a node group could launch into
// count as domains with zero pods, so that new nodes spread too.
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
			return fail(Unresolvable, ReasonSpreadMissingLabel, fmt.Sprintf("node has no %s label", sc.TopologyKey))
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
			return Status{Code: Unschedulable, Reason: ReasonSpread, Domain: Domain{Key: sc.TopologyKey, Value: v}}
		}
	}
	return OK
}
