package snapshot

import (
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Limit caps the total capacity of a set of nodes; only the resources it
// names are capped.
type Limit struct {
	Names []corev1.ResourceName
	Max   Resources
	// MaxPods caps the nodes' pod slots (their AllowedPods) when Names
	// holds pods.
	MaxPods int64
}

// NewLimit converts a ResourceList of caps. A cap past what an int64 holds
// (in millicores for cpu) is the most it holds, not the negative number
// its conversion wraps to: a limit of "1e16" cpu, meant as none, would
// otherwise refuse every node.
func NewLimit(rl corev1.ResourceList) Limit {
	l := Limit{Max: fromList(rl, true)}
	for name := range rl {
		l.Names = append(l.Names, name)
	}
	if q, ok := rl[corev1.ResourcePods]; ok {
		l.MaxPods = saturated(q, maxUnits, minUnits, q.Value)
	}
	sort.Slice(l.Names, func(i, j int) bool { return l.Names[i] < l.Names[j] })
	return l
}

// Amount returns one resource of r.
func Amount(r *Resources, name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	}
	return r.Scalar[name]
}

// Exceeded returns the first resource that add - drop raises over the
// limit (used - drop + add over it), or "" (pod slots: ExceedsPods). A
// resource the change does not raise is not exceeded by it, as Cluster
// Autoscaler checks only the resources a new node adds: a GPU limit the
// group is past already (lowered below what runs) holds back no node
// without GPUs.
func (l *Limit) Exceeded(used, drop, add *Resources) corev1.ResourceName {
	for _, n := range l.Names {
		if delta := Amount(add, n) - Amount(drop, n); n != corev1.ResourcePods && delta > 0 && Amount(used, n)+delta > Amount(&l.Max, n) {
			return n
		}
	}
	return ""
}

// ExceedsPods reports whether used + add pod slots are over the limit.
func (l *Limit) ExceedsPods(used, add int64) bool {
	return slices.Contains(l.Names, corev1.ResourcePods) && used+add > l.MaxPods
}

// SetLimits caps the capacity of a node group's nodes.
func (s *Snapshot) SetLimits(group string, rl corev1.ResourceList) { s.limits[group] = NewLimit(rl) }

// SetClusterLimits caps the capacity of all nodes.
func (s *Snapshot) SetClusterLimits(rl corev1.ResourceList) { s.clusterLimit = NewLimit(rl) }

// GroupLimit returns a node group's limit.
func (s *Snapshot) GroupLimit(group string) Limit { return s.limits[group] }

// ClusterLimit returns the cluster-wide limit.
func (s *Snapshot) ClusterLimit() Limit { return s.clusterLimit }

// LimitRoom is the largest capacity a node may have within the limits.
type LimitRoom struct {
	cpu, memory, storage, pods int64
	scalar                     map[corev1.ResourceName]int64
}

// LimitRoom returns the largest capacity (and pod slots) a node of the
// group that currently accounts for current (and currentSlots) may grow to
// within the group and cluster limits. Compute it once and test many
// options with Allows and AllowsOption.
func (s *Snapshot) LimitRoom(group string, current *Resources, currentSlots int64) LimitRoom {
	h := LimitRoom{cpu: math.MaxInt64, memory: math.MaxInt64, storage: math.MaxInt64, pods: math.MaxInt64}
	g := s.groups[group]
	var used Resources
	var slots int64
	if g != nil {
		used, slots = g.Capacity, g.Slots
	}
	gl := s.limits[group]
	h.lower(&gl, &used, current, slots, currentSlots)
	h.lower(&s.clusterLimit, &s.total, current, s.totalSlots, currentSlots)
	return h
}

// LimitRoomOf is LimitRoom for a node of the snapshot, as it accounts now.
func (s *Snapshot) LimitRoomOf(n *Node) LimitRoom {
	return s.LimitRoom(n.NodeGroup, &n.Capacity, n.slots)
}

func (h *LimitRoom) lower(l *Limit, used, current *Resources, usedSlots, currentSlots int64) {
	for _, n := range l.Names {
		if n == corev1.ResourcePods {
			h.pods = min(h.pods, l.MaxPods-usedSlots+currentSlots)
			continue
		}
		left := Amount(&l.Max, n) - Amount(used, n) + Amount(current, n)
		switch n {
		case corev1.ResourceCPU:
			h.cpu = min(h.cpu, left)
		case corev1.ResourceMemory:
			h.memory = min(h.memory, left)
		case corev1.ResourceEphemeralStorage:
			h.storage = min(h.storage, left)
		default:
			if h.scalar == nil {
				h.scalar = map[corev1.ResourceName]int64{}
			}
			if v, ok := h.scalar[n]; !ok || left < v {
				h.scalar[n] = left
			}
		}
	}
}

// AllowsOption reports whether a node launched as option o fits the
// room: its capacity and its pod slots.
func (h *LimitRoom) AllowsOption(o *Option) bool {
	return h.AllowsPods(int64(o.AllowedPods)) && h.Allows(o.Counted())
}

// AllowsPods reports whether a node of that many pod slots fits the room.
func (h *LimitRoom) AllowsPods(slots int64) bool { return slots <= h.pods }

// Allows reports whether capacity c fits the room (pod slots aside). A
// resource c has none of fits whatever the room, also a room below zero
// (a limit the nodes are past already): as Exceeded, a limit holds back
// only the nodes that have what it caps.
func (h *LimitRoom) Allows(c *Resources) bool {
	if over(c.MilliCPU, h.cpu) || over(c.Memory, h.memory) || over(c.EphemeralStorage, h.storage) {
		return false
	}
	if len(h.scalar) == 0 {
		return true
	}
	for n, v := range h.scalar {
		if over(c.Scalar[n], v) {
			return false
		}
	}
	return true
}

// over reports whether an amount of a resource passes the room left.
func over(amount, room int64) bool { return amount > 0 && amount > room }

// Cheapest returns the option a planned node is launched as: the cheapest,
// then the smallest.
func Cheapest(opts []*Option) *Option {
	var best *Option
	for _, o := range opts {
		if best == nil || o.Price < best.Price || (o.Price == best.Price && o.Allocatable.MilliCPU < best.Allocatable.MilliCPU) {
			best = o
		}
	}
	return best
}
