package predicates

import (
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// VolumeNodeAffinity keeps pods on nodes their bound PersistentVolumes can
// be attached to (the VolumeBinding filter for bound claims). Unbound
// claims are not checked: their volumes are provisioned where the pod lands.
type VolumeNodeAffinity struct{}

var _ Filter = VolumeNodeAffinity{}

// ReasonVolumeNodeAffinity is kube-scheduler's VolumeBinding reason.
const ReasonVolumeNodeAffinity = "node(s) had volume node affinity conflict"

// Name returns the filter name.
func (VolumeNodeAffinity) Name() string { return "VolumeNodeAffinity" }

// Filter fails nodes outside a bound volume's node affinity.
func (VolumeNodeAffinity) Filter(_ *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if c.VolumeError != "" {
		return failStatic(Unresolvable, c.VolumeError, "")
	}
	for _, sel := range c.VolumeAffinity {
		if !sel.Match(n.Node) {
			return fail(Unresolvable, ReasonVolumeNodeAffinity, "")
		}
	}
	return OK
}
