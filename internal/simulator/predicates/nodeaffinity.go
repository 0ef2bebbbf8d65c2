package predicates

import (
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// NodeAffinity checks nodeSelector and required node affinity (In, NotIn,
// Exists, DoesNotExist, Gt, Lt; matchFields on metadata.name). On a planned
// node whose instance type is not chosen yet, a pod that names
// option-specific labels fits if at least one remaining option matches.
type NodeAffinity struct{}

var _ Filter = NodeAffinity{}

// ReasonNodeAffinity is kube-scheduler's NodeAffinity reason.
const ReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector"

// Name returns the filter name.
func (NodeAffinity) Name() string { return "NodeAffinity" }

// Filter fails nodes the pod's node selection excludes.
func (NodeAffinity) Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if !c.HasNodeAffinity {
		return OK
	}
	if n.Flex != nil && s.ReferencesOptionKeys(c) {
		for _, o := range n.Flex.Options {
			if ok, _ := c.NodeAffinity.Match(o.Node); ok {
				return OK
			}
		}
		return fail(Unresolvable, ReasonNodeAffinity, "no instance type or capacity type matches the pod's node selector/affinity")
	}
	if ok, _ := c.NodeAffinity.Match(n.Node); ok {
		return OK
	}
	st := fail(Unresolvable, ReasonNodeAffinity, "")
	st.Static = !c.NamesNodes
	return st
}
