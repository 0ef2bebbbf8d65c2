package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
)

// DRA is what the snapshot reads of dynamic resource allocation; the
// model of it lives in package dynamicresources.
type DRA = dynamicresources.Objects

// ClaimKey identifies a shared claim (ClaimNode, ClaimUsers).
type ClaimKey = dynamicresources.ClaimKey

// draModel is the DRA model of a snapshot: it knows nodes as *Node and
// options as *Option. The snapshot tells it what the journal changes:
// Changed on every node or pod change, Place and Unplace from place and
// unplace, so that Revert undoes device allocations with the pods.
type draModel = dynamicresources.Model[*Node, *Option]

// Devices returns the node object a node of this option is and the
// ResourceSlices it publishes, for the DRA model.
func (o *Option) Devices() (*corev1.Node, []*resourcev1.ResourceSlice) { return o.Node, o.Slices }

// draNodes answers the DRA model's questions about the snapshot's nodes.
type draNodes Snapshot

var _ dynamicresources.Nodes[*Node, *Option] = (*draNodes)(nil)

// Host describes a node to the DRA model.
func (*draNodes) Host(n *Node) dynamicresources.Host[*Option] {
	h := dynamicresources.Host[*Option]{Node: n.Node, Expected: n.ExpectedSlices, Template: n.Template}
	if n.Flex != nil {
		h.Flex, h.Options = true, n.Flex.Options
	}
	return h
}

// Fitting appends to buf the options of planned node n (only, unless it
// is nil) that hold its pods plus one pod of the class within the limits
// and that the class's node selection allows (an option with the devices
// that the pod's selection refuses is none: the node would be narrowed to
// no option).
func (d *draNodes) Fitting(n *Node, class int, only *Option, buf []*Option) []*Option {
	s := (*Snapshot)(d)
	c := s.classList[class]
	h := s.LimitRoomOf(n)
	checkLabels := s.ReferencesOptionKeys(c)
	for _, o := range n.Flex.Options {
		if only != nil && o != only {
			continue
		}
		if n.FitsOption(o, c.RequestsOn(n), c.PodsOn(n)) && h.AllowsOption(o) && (!checkLabels || c.MatchesOption(o.Node)) {
			buf = append(buf, o)
		}
	}
	return buf
}

// devices is what the pods of class c ask of the DRA model.
func (c *Class) devices() dynamicresources.Request {
	return dynamicresources.Request{Class: c.ID, Claims: c.Claims, Wait: c.ClaimWait}
}

// CheckDevices answers whether the pods of class c can get their claims
// on node n, given what the cluster has allocated and what the plan
// allocated there for the pods placed before (dynamicresources.Model.Check).
// The string says why not.
func (s *Snapshot) CheckDevices(c *Class, n *Node) (dynamicresources.Verdict, string) {
	return s.dra.Check(c.devices(), n, false).Result()
}

// OptionHasDevices reports whether a pod of class c can get its devices
// on node n (a template or a planned node) launched as option o.
func (s *Snapshot) OptionHasDevices(n *Node, o *Option, c *Class) bool {
	if len(c.Claims) == 0 {
		return true
	}
	return s.dra.OptionFits(c.devices(), n, o)
}

// DeviceUnits is how many pods of class c the devices of option o hold
// (+Inf for a class without claims of its own per pod); the planner
// weighs the price of an option by it (dynamicresources.Model.Units).
func (s *Snapshot) DeviceUnits(o *Option, c *Class) float64 { return s.dra.Units(c.devices(), o) }

// ClaimNode returns the node the plan allocates a shared claim on, nil when
// no placed pod uses it yet.
func (s *Snapshot) ClaimNode(k ClaimKey) *Node { return s.dra.ClaimNode(k) }

// ClaimUsers returns how many placed pods of the plan use a shared claim.
func (s *Snapshot) ClaimUsers(k ClaimKey) int { return s.dra.ClaimUsers(k) }

// HeldForWorkload says which claim reserved for a live PodGroup is
// allocated on devices of node n ("" when none): scale-down keeps such a
// node. O(workload claims).
func (s *Snapshot) HeldForWorkload(n *Node) string { return s.dra.HeldForWorkload(n.Node) }

// DeviceClass returns a DeviceClass by name, or nil.
func (s *Snapshot) DeviceClass(name string) *resourcev1.DeviceClass { return s.dra.DeviceClass(name) }
