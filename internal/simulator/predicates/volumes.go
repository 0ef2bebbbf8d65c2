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

// Filter fails nodes outside a bound volume's node affinity. On a
// planned node whose offerings differ in a label the affinity reads (an
// instance type), one offering the pod's node selection and the volumes
// both accept is enough: the node is launched as one of those.
func (VolumeNodeAffinity) Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if c.VolumeError != "" {
		return failStatic(Unresolvable, c.VolumeError, "")
	}
	if n.Flex != nil && len(c.VolumeKeys) > 0 && s.ReferencesOptionKeys(c) {
		for _, o := range n.Flex.Options {
			if c.MatchesOption(o.Node) {
				return OK
			}
		}
		return fail(Unresolvable, ReasonVolumeNodeAffinity, "")
	}
	for _, sel := range c.VolumeAffinity {
		if !sel.Match(n.Node) {
			return fail(Unresolvable, ReasonVolumeNodeAffinity, "")
		}
	}
	return OK
}
