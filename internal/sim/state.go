package sim

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// node is a node of the simulated cluster.
type node struct {
	obj        *corev1.Node
	group      string
	price      float64
	instance   string
	capacity   string // capacity type
	launchedAt time.Time
	readyAt    time.Time
	ready      bool
	// draining: tainted berth.dev/disrupted, its pods being evicted.
	draining bool
	// replacedBy: the replacement berth launched for it (scale-down).
	replacedBy string
	headroom   bool // launched for headroom units only
	atStart    bool // part of the cluster the trace began with
	// standbyFor names the Headroom whose standby units the node keeps
	// ("" for other nodes and once resumed); suspended once it booted.
	standbyFor string
	suspended  bool
	// stopped is its price per hour while suspended.
	stopped float64
	// resumedAt is when it was resumed from standby (zero if never).
	resumedAt time.Time
}

// rate is what the node costs an hour now.
func (n *node) rate() float64 {
	if n.suspended {
		return n.stopped
	}
	return n.price
}

// pod is a pod of the simulated cluster: one incarnation of a trace pod
// (an evicted pod is recreated under a new name by its controller).
type pod struct {
	obj     *corev1.Pod
	created time.Time
	bound   time.Time
	// tried: the scheduler tried the pod and found no node (it counts as
	// waiting for capacity from its creation on).
	tried bool
	// needed: the pod waited for a node (a scheduling attempt failed).
	needed bool
	// trace is the name the trace knows the pod by; recreated is set on
	// the pods a controller made again after an eviction.
	trace       string
	recreated   bool
	placeholder string // the Headroom whose placeholder this is
	nominated   string // node berth launched for it
	nominatedAt time.Time
	deleted     bool // deleted from the engine (Engine.podList drops it)
	// running: the trace began with the pod running; it is placed before
	// the clock starts and counts in no wait.
	running bool
}

func (p *pod) key() string { return p.obj.Namespace + "/" + p.obj.Name }

func (p *pod) isBound() bool { return p.obj.Spec.NodeName != "" }

// priority of a pod (0 when unset).
func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// launching is the synthetic node of an instance being launched: NotReady
// with the not-ready taint, created at its launch (the planner counts it
// as booting).
func launchingNode(n *corev1.Node, at time.Time) *corev1.Node {
	n = n.DeepCopy()
	n.CreationTimestamp.Time = at
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	return n
}

// readyNode marks the node Ready and initialized, its not-ready taint and
// startup taints gone.
func readyNode(n *corev1.Node, g *v1alpha1.NodeGroup) {
	var taints []corev1.Taint
	startup := map[string]bool{}
	for _, t := range g.Spec.Template.StartupTaints {
		startup[t.Key] = true
	}
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady && !startup[t.Key] {
			taints = append(taints, t)
		}
	}
	n.Spec.Taints = taints
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Labels[v1alpha1.LabelInitialized] = "true"
}
