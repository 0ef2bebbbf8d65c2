package snapshot

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
)

// AddPod places a pod on a node. On a flexible node the options narrow to
// those the node's pods still fit.
func (s *Snapshot) AddPod(p *Pod, n *Node) {
	u := undo{kind: undoAddPod, node: n, pod: p, devices: p.devices}
	var devs *dynamicresources.Answer[*Node, *Option]
	if len(p.Class.Claims) > 0 {
		devs = s.dra.Check(p.Class.devices(), n, true)
		p.devices = devs.Placement()
	}
	if n.Flex != nil {
		u.flex = &flexUndo{flex: n.Flex, alloc: n.Allocatable, allowed: n.AllowedPods, capacity: n.Capacity, current: n.Current}
		// Options only ever narrow: when none was dropped, the envelope and
		// the cheapest option stay as they are.
		if opts := s.narrow(n, p, devs); len(opts) != len(n.Flex.Options) {
			n.Flex = &Flex{Options: opts}
			n.envelope()
			if len(opts) > 0 {
				n.Current = Cheapest(opts)
				s.setCapacity(n, *n.Current.Counted())
			}
		}
	}
	s.place(p, n)
	s.record(u)
}

// narrow returns the options of flexible node n that still hold its pods
// and p (n's own list when all do), charged as place will charge it: a pending pod's companion only
// where n lacks its share key (charging it where the key is, would drop an
// option the pods fit exactly, down to none).
func (s *Snapshot) narrow(n *Node, p *Pod, devs *dynamicresources.Answer[*Node, *Option]) []*Option {
	c := p.Class
	req, pods := &c.Base, 1
	if p.pending() {
		req, pods = c.RequestsOn(n), c.PodsOn(n)
	}
	checkLabels := s.ReferencesOptionKeys(c)
	h := s.LimitRoomOf(n)
	opts := n.Flex.Options
	if devs == nil && !checkLabels && n.Flex.holdsAll(&n.Requested, n.podCount, req, pods, &h) {
		return opts
	}
	// out stays nil while every option holds: the node's own list is
	// returned then, and nothing is allocated (most pods drop nothing).
	var out []*Option
	for i, o := range opts {
		keep := n.FitsOption(o, req, pods) && h.AllowsOption(o) && (devs == nil || devs.Fits(o))
		if keep && checkLabels {
			keep = c.MatchesOption(o.Node)
		}
		switch {
		case keep && out != nil:
			out = append(out, o)
		case !keep && out == nil:
			out = make([]*Option, i, len(opts)-1)
			copy(out, opts[:i])
		}
	}
	if out == nil {
		return opts
	}
	return out
}

// Widen gives planned node n back every option of opts that its pods fit
// together: their requests and pod count, the limits, and the node
// selection of pods that name option labels (instance or capacity type).
// Options only narrow while pods are added, so a node keeps the options
// of its fullest moment; once pods have been moved off it, it may be
// launched as a smaller type. A node holding a pod that claims devices
// keeps its options (which options hold the devices is known only pod by
// pod). It reports whether the node's cheapest option changed.
// O(len(opts) x spread counters + pods on n).
func (s *Snapshot) Widen(n *Node, opts []*Option) bool {
	if n.Flex == nil || n.Current == nil || len(n.Pods) == 0 {
		return false
	}
	var named []*Class
	for _, p := range n.Pods {
		if len(p.Class.Claims) > 0 {
			return false
		}
		if s.ReferencesOptionKeys(p.Class) && !slices.Contains(named, p.Class) {
			named = append(named, p.Class)
		}
	}
	// A spread counter decided once whether n's pods count, from the
	// options n had then; an option that would make them count now is
	// left out, so that the counts stay what kube-scheduler will see.
	var uncounted []*Counter
	for _, k := range s.counters {
		if k.kind == kindSpread && n.eligCache(k.ID) == no && k.owner.Spread[k.term].NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
			uncounted = append(uncounted, k)
		}
	}
	h := s.LimitRoomOf(n)
	// The options are gathered in a buffer kept for the purpose and copied
	// out only when the node changes: most calls change nothing.
	out := s.widening[:0]
options:
	for _, o := range opts {
		if !n.HoldsIn(o) || !h.AllowsOption(o) {
			continue
		}
		for _, c := range named {
			if !c.MatchesOption(o.Node) {
				continue options
			}
		}
		for _, k := range uncounted {
			if ok, _ := k.owner.NodeAffinity.Match(o.Node); ok {
				continue options
			}
		}
		out = append(out, o)
	}
	cheapest := Cheapest(out)
	kept := cheapest != nil && cheapest.Price < n.Current.Price
	if kept {
		held := slices.Clone(out)
		s.record(undo{kind: undoWiden, node: n, flex: &flexUndo{flex: n.Flex, alloc: n.Allocatable, allowed: n.AllowedPods, capacity: n.Capacity, current: n.Current}})
		s.dra.Changed()
		n.Flex = &Flex{Options: held}
		n.envelope()
		n.Current = cheapest
		s.setCapacity(n, *cheapest.Counted())
	}
	clear(out) // the buffer keeps no option of an earlier round alive
	s.widening = out[:0]
	return kept
}

// LaunchAs records that planned node n is launched as o, one of its
// options: its capacity counts against its group's and the cluster's
// limits as o's, so a later choice sees what this one takes. Journaled.
func (s *Snapshot) LaunchAs(n *Node, o *Option) {
	if n.Flex == nil || o == nil || o == n.Current {
		return
	}
	s.record(undo{kind: undoWiden, node: n, flex: &flexUndo{flex: n.Flex, alloc: n.Allocatable, allowed: n.AllowedPods, capacity: n.Capacity, current: n.Current}})
	n.Current = o
	s.setCapacity(n, *o.Counted())
}

// HoldsIn reports whether the node's pods, as they are, fit option o
// (its pod count and requests next to o's DaemonSet overhead).
func (n *Node) HoldsIn(o *Option) bool {
	return n.podCount+o.OverheadPods <= o.AllowedPods && fitsWithOverhead(&n.Requested, &Resources{}, &o.Overhead, &o.Allocatable)
}

// FitsAnyOption reports whether a flexible node's pods plus a pending pod
// of class c fit at least one of its options that the node may
// become within the limits and that matches c's node selection where it
// names option labels: the option the pod narrows the node to. The
// current option is tried first (it is within the limits by definition).
func (s *Snapshot) FitsAnyOption(n *Node, c *Class) bool {
	req, pods := c.RequestsOn(n), c.PodsOn(n)
	checkLabels := s.ReferencesOptionKeys(c)
	matches := func(o *Option) bool {
		return !checkLabels || c.MatchesOption(o.Node)
	}
	if o := n.Current; o != nil && n.FitsOption(o, req, pods) && matches(o) {
		return true
	}
	h := s.LimitRoomOf(n)
	for _, o := range n.Flex.Options {
		if n.FitsOption(o, req, pods) && h.AllowsOption(o) && matches(o) {
			return true
		}
	}
	return false
}

func (s *Snapshot) place(p *Pod, n *Node) { s.placeAs(p, n, nil) }

// placeAs is place, charging the pod's companion as addOn says when it is
// set (a Revert putting the pod back as it was), as charge decides when nil.
func (s *Snapshot) placeAs(p *Pod, n *Node, addOn *bool) {
	s.dra.Changed()
	p.Node = n
	p.slot = len(n.Pods)
	n.Pods = append(n.Pods, p)
	p.Class.placed++
	if addOn != nil {
		n.chargeAs(p, *addOn)
	} else {
		n.charge(p)
	}
	s.roomTaken(n)
	n.HostPorts = append(n.HostPorts, p.Class.HostPorts...)
	if len(p.Class.Claims) > 0 {
		s.dra.Place(n, p.devices, p.Class.Claims)
	}
	for _, k := range p.Class.OncePodClaims {
		if s.oncePodUsers == nil {
			s.oncePodUsers = map[types.NamespacedName]int{}
		}
		s.oncePodUsers[k]++
	}
	for _, k := range p.Class.counters {
		if k.eligible(n) {
			k.count(n, 1)
		}
	}
}

// RemovePod takes a placed pod off its node.
func (s *Snapshot) RemovePod(p *Pod) {
	n, slot, addOn := p.Node, p.slot, p.addOn
	s.unplace(p)
	s.record(undo{kind: undoRemovePod, node: n, pod: p, slot: int32(slot), addOn: addOn})
}

// replace reverses RemovePod: it puts p back in its slot of n.Pods and the
// pod that took the slot back at the end, so that a Revert restores the
// order of a node's pods exactly (the planner walks them in that order).
func (s *Snapshot) replace(p *Pod, n *Node, slot int, addOn bool) {
	s.placeAs(p, n, &addOn)
	last := len(n.Pods) - 1
	if slot == last {
		return
	}
	moved := n.Pods[slot]
	n.Pods[slot], n.Pods[last] = p, moved
	p.slot, moved.slot = slot, last
}

func (s *Snapshot) unplace(p *Pod) {
	s.dra.Changed()
	n := p.Node
	if len(p.Class.Claims) > 0 {
		p.devices = s.dra.Unplace(n, p.devices, p.Class.Claims)
	}
	for _, k := range p.Class.OncePodClaims {
		if s.oncePodUsers[k]--; s.oncePodUsers[k] <= 0 {
			delete(s.oncePodUsers, k)
		}
	}
	for _, k := range p.Class.counters {
		if k.eligible(n) {
			k.count(n, -1)
		}
	}
	last := len(n.Pods) - 1
	n.Pods[p.slot] = n.Pods[last]
	n.Pods[p.slot].slot = p.slot
	n.Pods = n.Pods[:last]
	p.Class.placed--
	n.discharge(p)
	s.roomFreed(n)
	n.HostPorts = removePorts(n.HostPorts, p.Class.HostPorts)
	p.Node = nil
}

func removePorts(have, remove []HostPort) []HostPort {
	for _, r := range remove {
		for i, h := range have {
			if h == r {
				have = append(have[:i], have[i+1:]...)
				break
			}
		}
	}
	return have
}
