package predicates

import (
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// VolumeRestrictions keeps a pod off every node while another placed pod
// uses one of its ReadWriteOncePod claims: one pod at a time may use such
// a claim. (kube-scheduler's plugin also checks in-tree volumes that
// cannot be shared; berth plans for CSI volumes only.)
type VolumeRestrictions struct{}

var _ Filter = VolumeRestrictions{}

// ReasonReadWriteOncePodConflict is kube-scheduler's VolumeRestrictions
// reason for a ReadWriteOncePod claim another pod uses.
const ReasonReadWriteOncePodConflict = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

// Name returns the filter name.
func (VolumeRestrictions) Name() string { return "VolumeRestrictions" }

// Filter fails every node while a claim of the pod is in use. The failure
// may pass later in the plan (the other pod may leave: a scale-down
// simulation moves it).
func (VolumeRestrictions) Filter(s *snapshot.Snapshot, c *snapshot.Class, _ *snapshot.Node) Status {
	for _, k := range c.OncePodClaims {
		if s.OncePodClaimInUse(k) {
			return fail(Unschedulable, ReasonReadWriteOncePodConflict, "claim "+k.String()+" (ReadWriteOncePod) is in use by another pod")
		}
	}
	return OK
}
