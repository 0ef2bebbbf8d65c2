package predicates

import (
	"fmt"

	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// DynamicResources is kube-scheduler's DynamicResources filter: a pod's
// ResourceClaims (its own, made per pod from templates, shared with other
// pods, or held for its whole PodGroup) must be allocatable on the node's
// devices by the structured allocator
// (k8s.io/dynamic-resource-allocation/structured), or already be allocated
// on devices the node can use. A claim the plan allocates for one pod pins
// every other user of the claim to the same node. On a node group
// template the pod fits when one instance type publishes the devices.
type DynamicResources struct{}

var _ Filter = DynamicResources{}

// kube-scheduler's DynamicResources reasons.
const (
	ReasonClaimNotAvailable = "resourceclaim not available on the node"
	ReasonCannotAllocate    = "cannot allocate all claims"
	ReasonClaimInUse        = "resourceclaim in use"
)

// Name returns the filter name.
func (DynamicResources) Name() string { return "DynamicResources" }

// Filter fails nodes whose devices cannot satisfy the pod's claims.
func (DynamicResources) Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if c.ClaimWait == "" && len(c.Claims) == 0 {
		return OK
	}
	verdict, why := s.CheckDevices(c, n)
	switch verdict {
	case dynamicresources.DevicesFit:
		return OK
	case dynamicresources.ClaimsPending, dynamicresources.ClaimInvalid:
		return fail(Unresolvable, why, "")
	case dynamicresources.ClaimElsewhere:
		return fail(Unresolvable, ReasonClaimNotAvailable, why)
	case dynamicresources.ClaimFull:
		return fail(Unresolvable, ReasonClaimInUse, why)
	}
	if n.Template {
		return fail(Unresolvable, ReasonCannotAllocate, fmt.Sprintf("no instance type of %s publishes devices for %s", n.NodeGroup, why))
	}
	if n.Flex != nil {
		return fail(Unresolvable, ReasonCannotAllocate, "no single instance type has devices for the node's claims together with "+why)
	}
	return fail(Unresolvable, ReasonCannotAllocate, fmt.Sprintf("%s: not enough free devices for %s", ReasonCannotAllocate, why))
}
