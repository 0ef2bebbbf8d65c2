package headroomtarget

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/berth-dev/berth/internal/headroom/demand"
)

// podWait is the wait for capacity of the pods in scope of a Headroom
// with a target: from creation (or the removal of its scheduling gates)
// to binding when a scheduling attempt found no room or it was nominated
// to a node (pendingPod.waited), else 0.
var podWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "berth_headroom_pod_wait_seconds",
	Help:    "Wait for capacity of the pods in scope of a Headroom with a target: creation (or scheduling gates removed) to binding for pods that a scheduling attempt found no room for or that were nominated to a node, 0 for the others.",
	Buckets: append([]float64{0}, demand.WaitEdges...),
}, []string{"headroom", "nodegroup"})

// RegisterMetrics registers the learner's metrics with controller-runtime.
func RegisterMetrics() {
	metrics.Registry.MustRegister(podWait)
}
