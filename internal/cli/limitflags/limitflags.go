// Package limitflags holds the cluster-wide limit flags that `berth
// controller` and `berth plan` share, parsed by apimachinery's
// resource.QuantityValue behind quantity.Parse: a malformed quantity fails
// at flag parsing.
package limitflags

import (
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/quantity"
)

// ClusterLimits are --cluster-max-cpu and --cluster-max-memory, and the
// node caps --max-nodes-total and --max-nodes-per-round.
type ClusterLimits struct {
	CPU           Quantity
	Memory        Quantity
	Nodes         int
	NodesPerRound int
}

// Quantity is a quantity flag: resource.QuantityValue, but a string
// apimachinery cannot parse in time (an exponent of more than three
// digits) is refused before it sees it.
type Quantity struct {
	resource.QuantityValue
}

// Set parses s through quantity.Parse.
func (q *Quantity) Set(s string) error {
	v, err := quantity.Parse(s)
	if err != nil {
		return err
	}
	q.Quantity = v
	return nil
}

// Bind registers the flags with their defaults (scaleup.DefaultClusterLimits).
func (l *ClusterLimits) Bind(fs *pflag.FlagSet) {
	l.CPU.Quantity = scaleup.DefaultClusterLimits[corev1.ResourceCPU]
	l.Memory.Quantity = scaleup.DefaultClusterLimits[corev1.ResourceMemory]
	fs.Var(&l.CPU, "cluster-max-cpu", "cluster-wide limit on the cpu of all nodes")
	fs.Var(&l.Memory, "cluster-max-memory", "cluster-wide limit on the memory of all nodes")
	fs.IntVar(&l.Nodes, "max-nodes-total", 0, "cluster-wide cap on the number of nodes, those of no node group included; no node is launched past it (0: no cap)")
	fs.IntVar(&l.NodesPerRound, "max-nodes-per-round", DefaultNodesPerRound,
		"cap on the nodes one provisioning round launches; the pods left wait for the next round (0: no cap)")
}

// DefaultNodesPerRound is --max-nodes-per-round's default, Cluster
// Autoscaler's --max-nodes-per-scaleup: it bounds what one decision, or a
// flood of pods a user created by mistake, may buy at once.
const DefaultNodesPerRound = 1000

// Limits returns the limits and the node caps (List, Caps), or an error
// when one is out of range.
func (l *ClusterLimits) Limits() (scaleup.Limits, error) {
	resources, err := l.List()
	if err != nil {
		return scaleup.Limits{}, err
	}
	caps, err := l.Caps()
	if err != nil {
		return scaleup.Limits{}, err
	}
	return scaleup.Limits{Resources: resources, Nodes: caps}, nil
}

// Caps returns the node caps, or an error when one is negative.
func (l *ClusterLimits) Caps() (scaleup.NodeCaps, error) {
	for name, v := range map[string]int{"--max-nodes-total": l.Nodes, "--max-nodes-per-round": l.NodesPerRound} {
		if v < 0 {
			return scaleup.NodeCaps{}, fmt.Errorf("%s must be 0 (no cap) or positive, not %d", name, v)
		}
	}
	return scaleup.NodeCaps{Total: l.Nodes, PerRound: l.NodesPerRound}, nil
}

// List returns the limits, or an error when one is not positive.
func (l *ClusterLimits) List() (corev1.ResourceList, error) {
	for name, q := range map[string]resource.Quantity{"--cluster-max-cpu": l.CPU.Quantity, "--cluster-max-memory": l.Memory.Quantity} {
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("%s must be positive, not %s", name, q.String())
		}
	}
	return corev1.ResourceList{corev1.ResourceCPU: l.CPU.Quantity, corev1.ResourceMemory: l.Memory.Quantity}, nil
}
