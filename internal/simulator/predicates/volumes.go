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

// ReasonReadWriteOncePodConflict is kube-scheduler's VolumeRestrictions
// reason for a ReadWriteOncePod claim another pod uses.
const ReasonReadWriteOncePodConflict = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

// Filter fails nodes outside a bound volume's node affinity, and every
// node while another pod uses one of the pod's ReadWriteOncePod claims
// (kube-scheduler's VolumeRestrictions).
func (VolumeNodeAffinity) Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if c.VolumeError != "" {
		return failStatic(Unresolvable, c.VolumeError, "")
	}
	for _, k := range c.OncePodClaims {
		if s.OncePodClaimInUse(k) {
			return fail(Unschedulable, ReasonReadWriteOncePodConflict, "claim "+k.String()+" (ReadWriteOncePod) is in use by another pod")
		}
	}
	for _, sel := range c.VolumeAffinity {
		if !sel.Match(n.Node) {
			return fail(Unresolvable, ReasonVolumeNodeAffinity, "")
		}
	}
	return OK
}
