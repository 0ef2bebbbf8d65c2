package provisioning

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Launch results and reasons: the values of the launch metric's labels,
// one lowercase set.
const (
	resultLaunched = "launched"
	resultFailed   = "failed"
	resultResumed  = "resumed" // a suspended standby node resumed instead of a launch
	// Why a node was launched.
	reasonPendingPods = "pending_pods"
	reasonMinSize     = "min_size"
	reasonHeadroom    = "headroom" // only headroom units and buffer chunks need it
	// Why a launch failed.
	reasonInsufficientCapacity = "insufficient_capacity"
	reasonError                = "error"
	reasonMaxSize              = "max_size"
)

var (
	pendingPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "pending_pods",
		Help: "Pods waiting for a node in the last provisioning round: the scheduler found none for them, or for another pod of their controller.",
	})
	oldestPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "oldest_pending_pod_seconds",
		Help: "Age of the oldest pod the last provisioning round saw waiting for capacity (0 when none waits).",
	})
	launches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "node_launches_total",
		Help: "Node launches by node group, result (launched, resumed: a standby node, failed) and reason (pending_pods, min_size, headroom; insufficient_capacity, error, max_size: refused, the group filled by another launcher).",
	}, []string{"nodegroup", "result", "reason"})
	planDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "plan_duration_seconds",
		Help:    "Time to compute a scale-up plan.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	readDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "read_duration_seconds",
		Help:    "Time to read a provisioning round's view of the cluster from the informer cache: objects, pods sorted, headroom units (before the plan).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	snapshotBuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "snapshot_builds_total",
		Help: "Models of the cluster a plan was made on, by how: \"incremental\" (the last round's, brought up to date with what changed: the pods the informer's events named, or every pod when events were lost) or \"scratch\" (built from every node and pod: the first round, and rounds after what the model does not follow incrementally changed, or with DRA objects).",
	}, []string{"how"})
	clusterNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "cluster_nodes",
		Help: "Nodes the last provisioning round counted against --max-nodes-total: every node but a virtual kubelet's, launching and deleting ones included.",
	})
	maxNodesTotal = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "max_nodes_total",
		Help: "The controller's --max-nodes-total (0: no cap).",
	})
	roundErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "round_errors_total",
		Help: "Provisioning rounds that failed (they are retried).",
	})
)

// RegisterMetrics adds the provisioning metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() {
	metrics.Registry.MustRegister(pendingPods, oldestPending, launches, planDuration, readDuration, snapshotBuilds, roundErrors, clusterNodes, maxNodesTotal)
}

// observeNodes publishes the nodes counted against --max-nodes-total
// (nodes, launching ones included) and the cap.
func observeNodes(nodes []*corev1.Node, limit int) {
	n := 0
	for _, node := range nodes {
		if snapshot.InClusterTotal(node, node.Labels[v1alpha1.LabelNodeGroup]) {
			n++
		}
	}
	clusterNodes.Set(float64(n))
	maxNodesTotal.Set(float64(limit))
}

// observePending publishes how many pods wait for capacity and how long
// the oldest of them has waited (since its creation).
func observePending(pending map[types.NamespacedName]*corev1.Pod, now time.Time) {
	pendingPods.Set(float64(len(pending)))
	oldest := 0.0
	for _, p := range pending {
		oldest = max(oldest, now.Sub(p.CreationTimestamp.Time).Seconds())
	}
	oldestPending.Set(oldest)
}
