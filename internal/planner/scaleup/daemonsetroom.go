package scaleup

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// daemonSetRoom keeps room and host ports, on the nodes of berth's groups
// that are still booting and not Ready yet, or Ready for less than
// DaemonSetBindGrace (a node turning Ready starts a round before the
// DaemonSet controller has bound its agents), for the DaemonSet pods not
// bound there yet: once the node is Ready the DaemonSet controller binds
// them at once, and a pod planned into their room or onto their ports
// would not fit (or be preempted by a node-critical agent), as Karpenter
// keeps, on its existing nodes, room for the DaemonSets not there yet.
// The nodes' bound pods are read only when such a node exists.
type daemonSetRoom struct {
	dss     []daemonset.Pod
	groups  map[string]*v1alpha1.NodeGroup
	young   map[string]bool
	present map[string]map[types.NamespacedName]bool
}

func newDaemonSetRoom(in Input, groups map[string]*v1alpha1.NodeGroup, booting func(*corev1.Node) bool) *daemonSetRoom {
	if len(in.DaemonSets) == 0 {
		return nil
	}
	r := &daemonSetRoom{groups: groups, young: map[string]bool{}, present: map[string]map[types.NamespacedName]bool{}}
	for _, n := range in.Nodes {
		if groups[n.Labels[v1alpha1.LabelNodeGroup]] != nil && (!nodeutil.Ready(n) && booting(n) || justReady(n, in.Now)) {
			r.young[n.Name] = true
		}
	}
	if len(r.young) == 0 {
		return nil
	}
	for _, p := range in.Pods {
		if !r.young[p.Spec.NodeName] {
			continue
		}
		if ref := podutil.DaemonSetOf(p); ref != nil {
			on := r.present[p.Spec.NodeName]
			if on == nil {
				on = map[types.NamespacedName]bool{}
				r.present[p.Spec.NodeName] = on
			}
			on[types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}] = true
		}
	}
	r.dss = daemonset.Pods(in.DaemonSets)
	return r
}

// kept is n with the room of its DaemonSets' missing pods taken off its
// allocatable (but on a node whose room a caller kept already:
// daemonset.AnnotationRoomKept), or n itself, and the host ports those
// pods will hold there. Which DaemonSets run there is judged on the
// group's template taints, not the taints of a node coming up (the
// DaemonSet's pods wait for those to go, as the workload's do).
func (r *daemonSetRoom) kept(n *corev1.Node) (*corev1.Node, []snapshot.HostPort) {
	if r == nil || !r.young[n.Name] {
		return n, nil
	}
	g := r.groups[n.Labels[v1alpha1.LabelNodeGroup]]
	planned := &corev1.Node{ObjectMeta: n.ObjectMeta, Spec: corev1.NodeSpec{Taints: g.NodeTaints()}}
	var missing []daemonset.Pod
	var ports []snapshot.HostPort
	for _, d := range r.dss {
		if !r.present[n.Name][d.DaemonSet] && d.RunsOn(planned) {
			missing = append(missing, d)
			ports = append(ports, d.Ports...)
		}
	}
	// In one order whatever the order the DaemonSets were listed in: a
	// base holds the node as it was while its ports stay the same.
	slices.SortFunc(ports, func(a, b snapshot.HostPort) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
	})
	if len(missing) == 0 || n.Annotations[daemonset.AnnotationRoomKept] != "" {
		return n, ports
	}
	c := *n
	c.Status.Allocatable = daemonset.Remaining(n.Status.Allocatable, missing, planned)
	return &c, ports
}

// DaemonSetBindGrace is how long after a node turned Ready its
// DaemonSets' pods may still be on their way to it.
const DaemonSetBindGrace = time.Minute

// justReady reports whether the node turned Ready less than
// DaemonSetBindGrace before now (known: a zero now or transition time
// says nothing).
func justReady(n *corev1.Node, now time.Time) bool {
	if now.IsZero() {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() && now.Sub(c.LastTransitionTime.Time) < DaemonSetBindGrace
		}
	}
	return false
}
