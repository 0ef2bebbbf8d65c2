package predicates

import (
	"fmt"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// TaintToleration keeps pods off nodes with NoSchedule or NoExecute taints
// they do not tolerate; PreferNoSchedule taints do not block.
type TaintToleration struct{}

var _ Filter = TaintToleration{}

// ReasonTaint is kube-scheduler's TaintToleration reason.
const ReasonTaint = "node(s) had untolerated taint(s)"

// Name returns the filter name.
func (TaintToleration) Name() string { return "TaintToleration" }

// Filter fails nodes with an untolerated taint and names it.
func (TaintToleration) Filter(_ *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	t, untolerated := snapshot.UntoleratedTaint(n.Taints, c.Tolerations)
	if !untolerated {
		return OK
	}
	return failStatic(Unresolvable, ReasonTaint, fmt.Sprintf("untolerated taint %s=%s:%s", t.Key, t.Value, t.Effect))
}
