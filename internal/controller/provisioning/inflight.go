package provisioning

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// inflightTTL is how long a launched node that the cache has not shown yet
// is assumed to exist.
const inflightTTL = 2 * time.Minute

// inflight remembers nodes launched in recent rounds until the informer
// cache shows them, so that a round right after a launch does not launch
// the same capacity again.
type inflight struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	nodes map[string]inflightNode
}

type inflightNode struct {
	node *corev1.Node
	at   time.Time
	// resumed: a standby node resumed, which the cache shows as standby
	// until its watch event arrives; the node stands in for it till then.
	resumed bool
}

func newInflight(c clock.PassiveClock) *inflight {
	return &inflight{clock: c, nodes: map[string]inflightNode{}}
}

func (f *inflight) add(n *corev1.Node) {
	if n == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.Name] = inflightNode{node: n, at: f.clock.Now()}
}

// addResumed remembers a standby node resumed this round, as n.
func (f *inflight) addResumed(n *corev1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.Name] = inflightNode{node: n, at: f.clock.Now(), resumed: true}
}

// forget drops a launch the provider gave up on.
func (f *inflight) forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, name)
}

// observe forgets nodes the cache now has, and nodes older than the TTL.
func (f *inflight) observe(cached []*corev1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range cached {
		if e, ok := f.nodes[n.Name]; ok && (!e.resumed || !nodeutil.Standby(n)) {
			delete(f.nodes, n.Name)
		}
	}
	for name, n := range f.nodes {
		if f.clock.Since(n.at) > inflightTTL {
			delete(f.nodes, name)
		}
	}
}

// merge returns the cached nodes plus the inflight ones not among them.
func (f *inflight) merge(cached []*corev1.Node) []*corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.nodes) == 0 {
		return cached
	}
	have := make(map[string]bool, len(cached))
	out := make([]*corev1.Node, 0, len(cached)+len(f.nodes))
	for _, n := range cached {
		have[n.Name] = true
		if e, ok := f.nodes[n.Name]; ok && e.resumed && nodeutil.Standby(n) {
			n = e.node // the cache has not seen the resume yet
		}
		out = append(out, n)
	}
	for name, n := range f.nodes {
		if !have[name] {
			out = append(out, n.node)
		}
	}
	return out
}

// syntheticNode is what a launched node will look like to the planner:
// with room kept for the pods of the DaemonSets that will run on it, as
// the plan that launched it kept it. Once it registers, the DaemonSet
// controller binds those pods at once; without the room, a round before
// that would place pending pods there that then do not fit.
func syntheticNode(ng *v1alpha1.NodeGroup, inst *cloudprovider.Instance, dss []daemonset.Pod) *corev1.Node {
	n := cloudprovider.NodeFor(ng, inst.Offering, inst.NodeName)
	if n == nil {
		return nil
	}
	// Which DaemonSets run there is judged as for the planned node: on its
	// template's taints, not its startup taints (those agents remove).
	planned := &corev1.Node{ObjectMeta: n.ObjectMeta, Spec: corev1.NodeSpec{Taints: ng.NodeTaints()}}
	n.Status.Allocatable = daemonset.Remaining(n.Status.Allocatable, dss, planned)
	n.Annotations[daemonset.AnnotationRoomKept] = "true"
	return n
}
