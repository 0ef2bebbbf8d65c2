package nodegroup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var fleetPrice = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "berth", Subsystem: "nodegroup", Name: "price_per_hour",
	Help: "Total price per hour of a node group's nodes.",
}, []string{"nodegroup"})

// RegisterMetrics adds the node group metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() { metrics.Registry.MustRegister(fleetPrice) }
