package launchtimeout

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	timeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "launch_timeouts_total",
		Help: "Nodes deleted because they were not Ready within the maximum provision time.",
	}, []string{"nodegroup"})
	capped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "berth", Subsystem: "provisioning", Name: "launch_timeouts_capped_total",
		Help: "Launch timeouts not acted on because a cap held (per minute, per group share, or a partition).",
	})
)

// RegisterMetrics adds the metrics to controller-runtime's registry. Call
// once per process.
func RegisterMetrics() { metrics.Registry.MustRegister(timeouts, capped) }
