package tenant

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "tenant", Name: "phase_transitions_total",
		Help: "Tenants entering a phase (Pending, Provisioning, Running, Failed, Terminating).",
	}, []string{"phase"})
	timeToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "berth", Subsystem: "tenant", Name: "time_to_running_seconds",
		Help:    "Seconds from a tenant's creation to its pod running and Ready (including the launch of its node).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
)

// RegisterMetrics adds the tenant metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() { metrics.Registry.MustRegister(transitions, timeToRunning) }
