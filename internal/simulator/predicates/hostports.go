package predicates

import (
	"fmt"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// NodePorts keeps pods whose host ports are taken off a node. Two ports
// conflict when protocol and port are equal and the IPs are equal or one
// of them is 0.0.0.0.
type NodePorts struct{}

var _ Filter = NodePorts{}

// ReasonNodePorts is kube-scheduler's NodePorts reason.
const ReasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

// Name returns the filter name.
func (NodePorts) Name() string { return "NodePorts" }

// Filter fails nodes where a requested host port is in use.
func (NodePorts) Filter(_ *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	for _, want := range c.HostPorts {
		for _, used := range n.HostPorts {
			if want.Conflicts(used) {
				return fail(Unresolvable, ReasonNodePorts, fmt.Sprintf("host port %d/%s is in use", want.Port, want.Protocol))
			}
		}
	}
	return OK
}
