package predicates

import "github.com/berth-dev/berth/internal/simulator/snapshot"

// NodeName filters on spec.nodeName.
type NodeName struct{}

var _ Filter = NodeName{}

// ReasonNodeName is kube-scheduler's NodeName reason.
const ReasonNodeName = "node(s) didn't match the requested node name"

// Name returns the filter name.
func (NodeName) Name() string { return "NodeName" }

// Filter fails nodes other than the one the pod names.
func (NodeName) Filter(_ *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if c.NodeName == "" || c.NodeName == n.Name {
		return OK
	}
	return fail(Unresolvable, ReasonNodeName, "")
}
