package headroom

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/berth-dev/berth/api/v1alpha1"
)

var (
	desiredUnits = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "headroom", Name: "desired_units",
		Help: "Units of headroom berth keeps, per Headroom.",
	}, []string{"headroom"})
	readyUnits = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "headroom", Name: "ready_units",
		Help: "Units of headroom that fit in free capacity now, per Headroom.",
	}, []string{"headroom"})
)

// RegisterMetrics adds the headroom metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() { metrics.Registry.MustRegister(desiredUnits, readyUnits) }

func observe(name string, s *v1alpha1.HeadroomStatus) {
	desiredUnits.WithLabelValues(name).Set(float64(s.DesiredUnits))
	readyUnits.WithLabelValues(name).Set(float64(s.ReadyUnits))
}

func forget(name string) {
	desiredUnits.DeleteLabelValues(name)
	readyUnits.DeleteLabelValues(name)
}
