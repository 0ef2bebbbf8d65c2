package disruption

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	unremovable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "scaledown", Name: "unremovable_nodes",
		Help: "Nodes of berth's node groups that the last scale-down round could not remove, by reason.",
	}, []string{"reason"})
	removed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "scaledown", Name: "removed_nodes_total",
		Help: "Nodes removed by scale-down, by node group.",
	}, []string{"nodegroup"})
	drainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "berth", Subsystem: "scaledown", Name: "drain_duration_seconds",
		Help:    "Time from tainting a node to deleting it.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	drainTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "scaledown", Name: "drain_timeouts_total",
		Help: "Drains given up after the drain timeout, by node group.",
	}, []string{"nodegroup"})
	roundErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "scaledown", Name: "round_errors_total",
		Help: "Scale-down rounds that failed (they are retried).",
	})
)

// RegisterMetrics adds the scale-down metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() {
	metrics.Registry.MustRegister(unremovable, removed, drainDuration, drainTimeouts, roundErrors)
}
