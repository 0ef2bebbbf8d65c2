package predicates

import (
	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// NodeUnschedulable keeps pods off cordoned nodes unless they tolerate the
// unschedulable taint.
type NodeUnschedulable struct{}

var _ Filter = NodeUnschedulable{}

// ReasonUnschedulable is kube-scheduler's NodeUnschedulable reason.
const ReasonUnschedulable = "node(s) were unschedulable"

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// Name returns the filter name.
func (NodeUnschedulable) Name() string { return "NodeUnschedulable" }

// Filter fails cordoned nodes.
func (NodeUnschedulable) Filter(_ *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if !n.Unschedulable || v1helper.TolerationsTolerateTaint(klog.Background(), c.Tolerations, &unschedulableTaint, snapshot.TolerationComparisonOperators) {
		return OK
	}
	return fail(Unresolvable, ReasonUnschedulable, "")
}
