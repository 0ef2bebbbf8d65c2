package nodegroup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/berth-dev/berth/api/v1alpha1"
)

var (
	fleetPrice = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "nodegroup", Name: "price_per_hour",
		Help: "Total price per hour of a node group's nodes.",
	}, []string{"nodegroup"})
	groupNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "nodegroup", Name: "nodes",
		Help: "Nodes of a node group, launching ones included.",
	}, []string{"nodegroup"})
	groupMaxSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "nodegroup", Name: "max_size",
		Help: "A node group's maxSize: with berth_nodegroup_nodes, whether it is at its limit.",
	}, []string{"nodegroup"})
	// The offering labels are bounded by the group's spec (instance types
	// x zones x capacity types), never by pods.
	offeringStreak = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "berth", Subsystem: "nodegroup", Name: "offering_failure_streak",
		Help: "Launch failures in a row of an offering berth avoids now (status.unavailableOfferings); absent once it is tried again.",
	}, []string{"nodegroup", "instance_type", "zone", "capacity_type"})
)

// RegisterMetrics adds the node group metrics to controller-runtime's
// registry. Call once per process.
func RegisterMetrics() {
	metrics.Registry.MustRegister(fleetPrice, groupNodes, groupMaxSize, offeringStreak)
}

// observe publishes a node group's status as metrics.
func observe(ng *v1alpha1.NodeGroup, status *v1alpha1.NodeGroupStatus, price float64) {
	fleetPrice.WithLabelValues(ng.Name).Set(price)
	groupNodes.WithLabelValues(ng.Name).Set(float64(status.Nodes))
	groupMaxSize.WithLabelValues(ng.Name).Set(float64(ng.Spec.MaxSize))
	offeringStreak.DeletePartialMatch(prometheus.Labels{"nodegroup": ng.Name})
	for _, o := range status.UnavailableOfferings {
		offeringStreak.WithLabelValues(ng.Name, o.InstanceType, o.Zone, string(o.CapacityType)).Set(float64(o.Streak))
	}
}

// forget removes a node group's series once it is gone.
func forget(name string) {
	for _, g := range []*prometheus.GaugeVec{fleetPrice, groupNodes, groupMaxSize} {
		g.DeleteLabelValues(name)
	}
	offeringStreak.DeletePartialMatch(prometheus.Labels{"nodegroup": name})
}
