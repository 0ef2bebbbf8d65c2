package scaleup

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/binpack"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// DefaultClusterLimits cap the total capacity of all nodes when the caller
// sets none: Cluster Autoscaler's defaults (--cores-total 320000,
// --memory-total 6400000 GiB), a bound against a runaway, not a size
// (1000 cores, as before, kept every cluster past it from scaling up).
var DefaultClusterLimits = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("320000"),
	corev1.ResourceMemory: resource.MustParse("6400000Gi"),
}

// Limits are the cluster-wide bounds of a plan: the total capacity of
// all nodes (Resources; nil means DefaultClusterLimits) and their number
// (Nodes). One value, so that every planner input carries both.
type Limits struct {
	Resources corev1.ResourceList
	Nodes     NodeCaps
}

// NodeCaps cap the number of nodes, as Cluster Autoscaler's
// --max-nodes-total and --max-nodes-per-scaleup do: Total the nodes of
// the cluster (every node but a virtual kubelet's, those of no group and
// those being deleted included, as the cluster limits count them),
// PerRound the nodes one plan launches. Zero is no cap. Pods the caps
// leave without a node wait for the next round, explained.
type NodeCaps struct {
	Total    int
	PerRound int
}

// launcher applies node group max sizes, the node caps and, through the
// snapshot's limits, node group and cluster resource limits to the
// options of a template.
type launcher struct {
	groups map[string]*v1alpha1.NodeGroup
	caps   NodeCaps
	// before is how many nodes the snapshot had before the plan opened
	// any (PerRound counts from it).
	before int
}

var _ binpack.Launcher = (*launcher)(nil)

func newLauncher(groups []*v1alpha1.NodeGroup, caps NodeCaps, s *snapshot.Snapshot) *launcher {
	l := &launcher{groups: map[string]*v1alpha1.NodeGroup{}, caps: caps, before: s.TotalNodes()}
	for _, ng := range groups {
		l.groups[ng.Name] = ng
	}
	return l
}

// Allowed returns the options of t that one more node may use.
func (l *launcher) Allowed(s *snapshot.Snapshot, t *binpack.Template) ([]*snapshot.Option, string) {
	ng := l.groups[t.Group]
	usage := s.Group(t.Group)
	if usage.Nodes >= int(ng.Spec.MaxSize) {
		return nil, fmt.Sprintf("node group at maxSize %d", ng.Spec.MaxSize)
	}
	if why := l.capped(s); why != "" {
		return nil, why
	}
	all := t.Node.Flex.Options
	h := s.LimitRoom(t.Group, &snapshot.Resources{}, 0)
	if t.Node.Flex.WithinLimits(&h) {
		return all, "" // far from every limit: the template's own list
	}
	out := make([]*snapshot.Option, 0, len(all))
	for _, o := range all {
		if h.AllowsOption(o) {
			out = append(out, o)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	return nil, limitReason(s, t.Group, all)
}

// capped says which node cap keeps one more node out, or "".
func (l *launcher) capped(s *snapshot.Snapshot) string {
	n := s.TotalNodes()
	if l.caps.Total > 0 && n >= l.caps.Total {
		return fmt.Sprintf("cluster at its cap of %d nodes (%d nodes; --max-nodes-total)", l.caps.Total, n)
	}
	if l.caps.PerRound > 0 && n-l.before >= l.caps.PerRound {
		return fmt.Sprintf("round at its cap of %d nodes launched (--max-nodes-per-round; the next round plans the rest)", l.caps.PerRound)
	}
	return ""
}

// limitReason says which limit keeps even the smallest option out.
func limitReason(s *snapshot.Snapshot, group string, opts []*snapshot.Option) string {
	smallest := opts[0]
	for _, o := range opts {
		if o.Allocatable.MilliCPU < smallest.Allocatable.MilliCPU {
			smallest = o
		}
	}
	usage, total := s.Group(group), s.Total()
	var why []string
	gl, cl := s.GroupLimit(group), s.ClusterLimit()
	none := &snapshot.Resources{}
	if n := gl.Exceeded(&usage.Capacity, none, smallest.Counted()); n != "" {
		why = append(why, fmt.Sprintf("node group limit on %s reached (%s of %s)", n,
			snapshot.FormatQuantity(n, snapshot.Amount(&usage.Capacity, n)), snapshot.FormatQuantity(n, snapshot.Amount(&gl.Max, n))))
	}
	if gl.ExceedsPods(usage.Slots, int64(smallest.AllowedPods)) {
		why = append(why, fmt.Sprintf("node group limit on pods reached (%d pod slots of %d; the smallest type has %d)", usage.Slots, gl.MaxPods, smallest.AllowedPods))
	}
	if n := cl.Exceeded(&total, none, smallest.Counted()); n != "" {
		why = append(why, fmt.Sprintf("cluster limit on %s reached (%s of %s)", n,
			snapshot.FormatQuantity(n, snapshot.Amount(&total, n)), snapshot.FormatQuantity(n, snapshot.Amount(&cl.Max, n))))
	}
	if cl.ExceedsPods(s.TotalSlots(), int64(smallest.AllowedPods)) {
		why = append(why, fmt.Sprintf("cluster limit on pods reached (%d pod slots of %d)", s.TotalSlots(), cl.MaxPods))
	}
	if len(why) == 0 {
		return "limits reached"
	}
	return strings.Join(why, "; ")
}
