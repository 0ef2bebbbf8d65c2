package companion

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	steps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "companion", Name: "steps_total",
		Help: "Companion headroom steps: gated, held, shared, skipped, arrived, handed_over.",
	}, []string{"step"})
	ungateSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "berth", Subsystem: "companion", Name: "ungate_seconds",
		Help:    "Time from a gated workload's creation to berth removing its gate.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	})
)

// RegisterMetrics adds the companion metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() { metrics.Registry.MustRegister(steps, ungateSeconds) }
