package scaleup_test

import (
	"fmt"
	"math"
	"slices"

	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// This file is the exact side of the cost-quality test: a branch-and-bound
// search over every assignment of the pending pods to existing nodes and
// new nodes of a group in a zone (at most as many as the group's maxSize
// leaves), each new node costing its cheapest offering that holds its
// pods; and a checker that replays a plan against the same model.
//
// A zone spread (maxSkew 1) holds when the app's pod counts differ by at
// most one over its domains: the zones of the nodes, existing and new,
// and the zones a group that may still launch a node offers (berth and
// Karpenter count such a zone as a domain with no pods, so that pods
// spread into it; kube-scheduler sees it once the node exists). Counts
// within one of each other are reached by placing the pods in turn, so
// the final state decides.

// qBin is a node in the search: existing (fixed room, costs nothing) or
// new (room depends on the offering, narrowed by every pod added).
type qBin struct {
	existing *qNode
	// zone (index in qZones) and group (index in qCase.room; -1 for an
	// existing node) of the node.
	zone, group int
	configs     uint64   // new node: offerings still possible (bit i = configs[i])
	count       [8]uint8 // pods of each app
	cpu, mem    int64    // requested by pending pods placed here
	pods        int
	anti        uint8 // apps with anti-affinity present
	apps        uint8 // apps present
	price       float64
}

// qTemplate is a group in a zone: the offerings a new node of it may take.
type qTemplate struct {
	group, zone int
	configs     uint64
}

type qSearch struct {
	c      *qCase
	tmpls  []qTemplate
	opened []int // new nodes per group
	bins   []qBin
	assign []int // pod -> bin
	best   float64
	nodes  int // search nodes visited, to bound the work
	// first stops the search at the first plan found (feasible).
	first bool
}

// qSearchLimit bounds the search; a case that needs more is skipped.
const qSearchLimit = 5_000_000

// optimum returns the cheapest price of new nodes that places every
// pending pod, searching below the upper bound ub (berth's price, so that
// only strictly cheaper plans are looked for past it); ok is false when
// the search was cut short.
func optimum(c *qCase, ub float64) (price float64, ok bool) {
	if len(c.configs) > 64 {
		panic("more than 64 offerings")
	}
	s := &qSearch{c: c, assign: make([]int, len(c.pods)), best: ub, tmpls: templatesOf(c), opened: make([]int, len(c.room))}
	for i := range c.existing {
		s.bins = append(s.bins, qBin{existing: &c.existing[i], zone: c.existing[i].zoneIdx, group: -1})
	}
	s.dfs(0, 0)
	return s.best, s.nodes <= qSearchLimit
}

// feasible returns the price of some plan that places every pending pod,
// +Inf when there is none; ok is false when the search was cut short.
func feasible(c *qCase) (price float64, ok bool) {
	s := &qSearch{c: c, assign: make([]int, len(c.pods)), best: math.Inf(1), tmpls: templatesOf(c), opened: make([]int, len(c.room)), first: true}
	for i := range c.existing {
		s.bins = append(s.bins, qBin{existing: &c.existing[i], zone: c.existing[i].zoneIdx, group: -1})
	}
	s.dfs(0, 0)
	return s.best, s.nodes <= qSearchLimit || !math.IsInf(s.best, 1)
}

func (s *qSearch) dfs(i int, cost float64) {
	s.nodes++
	if s.nodes > qSearchLimit || (s.first && !math.IsInf(s.best, 1)) {
		return
	}
	if i == len(s.c.pods) {
		if spreadHolds(s.c, s.bins, s.opened) {
			s.best = min(s.best, cost)
		}
		return
	}
	p := &s.c.pods[i]
	// Identical pods (same app) are interchangeable: place them in
	// non-decreasing bin order so each partition is seen once.
	first := 0
	if i > 0 && s.c.pods[i-1].app == p.app {
		first = s.assign[i-1]
	}
	for b := first; b < len(s.bins); b++ {
		old := s.bins[b]
		nb, ok := s.add(old, p)
		if !ok || cost-old.price+nb.price >= s.best-1e-9 {
			continue
		}
		s.bins[b], s.assign[i] = nb, b
		s.dfs(i+1, cost-old.price+nb.price)
		s.bins[b] = old
	}
	for _, t := range s.tmpls {
		if s.opened[t.group] >= s.c.room[t.group] {
			continue
		}
		nb, ok := s.add(qBin{configs: t.configs, zone: t.zone, group: t.group}, p)
		if !ok || cost+nb.price >= s.best-1e-9 {
			continue
		}
		s.bins = append(s.bins, nb)
		s.opened[t.group]++
		s.assign[i] = len(s.bins) - 1
		s.dfs(i+1, cost+nb.price)
		s.opened[t.group]--
		s.bins = s.bins[:len(s.bins)-1]
	}
}

// templatesOf groups the offerings by group and zone.
func templatesOf(c *qCase) []qTemplate {
	var out []qTemplate
	for i, cfg := range c.configs {
		j := slices.IndexFunc(out, func(t qTemplate) bool { return t.group == cfg.groupIdx && t.zone == cfg.zoneIdx })
		if j < 0 {
			out = append(out, qTemplate{group: cfg.groupIdx, zone: cfg.zoneIdx})
			j = len(out) - 1
		}
		out[j].configs |= 1 << i
	}
	return out
}

// spreadHolds reports whether the pods of every spread app, placed as
// bins say, differ by at most one across the app's domains; opened is
// the new nodes per group (a group with room left offers its zones).
func spreadHolds(c *qCase, bins []qBin, opened []int) bool {
	var domain [2]bool
	for _, b := range bins {
		domain[b.zone] = true
	}
	for _, cfg := range c.configs {
		if opened[cfg.groupIdx] < c.room[cfg.groupIdx] {
			domain[cfg.zoneIdx] = true
		}
	}
	for a := range 8 {
		if !slices.ContainsFunc(c.pods, func(p qPod) bool { return p.app == a && p.spread }) {
			continue
		}
		var count [2]int
		for _, b := range bins {
			count[b.zone] += int(b.count[a])
		}
		lo, hi := math.MaxInt, 0
		for z, ok := range domain {
			if ok {
				lo, hi = min(lo, count[z]), max(hi, count[z])
			}
		}
		if hi-lo > 1 {
			return false
		}
	}
	return true
}

// add puts pod p on bin b, or says it cannot go there.
func (s *qSearch) add(b qBin, p *qPod) (qBin, bool) {
	bit := uint8(1) << p.app
	if b.anti&bit != 0 || (p.anti >= 0 && b.apps&bit != 0) {
		return b, false
	}
	b.cpu, b.mem, b.pods, b.apps = b.cpu+p.cpu, b.mem+p.mem, b.pods+1, b.apps|bit
	b.count[p.app]++
	if p.anti >= 0 {
		b.anti |= bit
	}
	if n := b.existing; n != nil {
		return b, p.fits(n.labels, n.tainted) && b.cpu <= n.cpu && b.mem <= n.mem && b.pods <= n.pods
	}
	b.price = math.Inf(1)
	for i, cfg := range s.c.configs {
		if b.configs&(1<<i) == 0 {
			continue
		}
		if !p.fits(cfg.labels, cfg.tainted) || b.cpu > cfg.cpu || b.mem > cfg.mem || b.pods > cfg.pods {
			b.configs &^= 1 << i
			continue
		}
		b.price = min(b.price, cfg.price)
	}
	return b, b.configs != 0
}

// checkPlan replays berth's plan on the model: every pending pod placed
// once, on a node where it is allowed and fits with the others, and the
// plan's price the sum of its new nodes' offerings.
func checkPlan(c *qCase, plan *scaleup.Plan) error {
	if len(plan.Unschedulable) > 0 {
		return fmt.Errorf("pod %s left unschedulable (%s), but a plan placing every pod exists", plan.Unschedulable[0].Pod, plan.Unschedulable[0].Message)
	}
	pods := map[string]*qPod{}
	for i := range c.pods {
		pods[c.pods[i].name] = &c.pods[i]
	}
	placed := map[string]bool{}
	place := func(b *qBin, name, where string) error {
		p := pods[name]
		if p == nil || placed[name] {
			return fmt.Errorf("pod %s on %s: unknown or placed twice", name, where)
		}
		placed[name] = true
		s := qSearch{c: c}
		nb, ok := s.add(*b, p)
		if !ok {
			return fmt.Errorf("pod %s does not fit on %s with the pods planned there", name, where)
		}
		*b = nb
		return nil
	}
	existing := map[string]*qBin{}
	for i := range c.existing {
		existing[c.existing[i].name] = &qBin{existing: &c.existing[i], zone: c.existing[i].zoneIdx, group: -1}
	}
	for _, pl := range plan.ExistingNodePlacements {
		b := existing[pl.Node]
		if b == nil {
			return fmt.Errorf("pod %s placed on unknown node %s", pl.Pod, pl.Node)
		}
		if err := place(b, pl.Pod.Name, pl.Node); err != nil {
			return err
		}
	}
	var (
		total float64
		bins  []qBin
	)
	opened := make([]int, len(c.room))
	for _, n := range plan.NewNodes {
		i := slices.IndexFunc(c.configs, func(cfg qConfig) bool {
			return cfg.group == n.NodeGroup && cfg.instanceType == n.InstanceType && cfg.zone == n.Zone && cfg.capacityType == n.CapacityType
		})
		if i < 0 {
			return fmt.Errorf("new node %s: no offering %s/%s/%s/%s", n.Name, n.NodeGroup, n.InstanceType, n.Zone, n.CapacityType)
		}
		b := &qBin{configs: 1 << i, zone: c.configs[i].zoneIdx, group: c.configs[i].groupIdx}
		for _, p := range n.Pods {
			if err := place(b, p.Name, n.Name+" ("+n.InstanceType+")"); err != nil {
				return err
			}
		}
		bins = append(bins, *b)
		total += c.configs[i].price
		if opened[b.group]++; opened[b.group] > c.room[b.group] {
			return fmt.Errorf("node group %s: %d new nodes, maxSize leaves room for %d", n.NodeGroup, opened[b.group], c.room[b.group])
		}
	}
	for _, b := range existing {
		bins = append(bins, *b)
	}
	if !spreadHolds(c, bins, opened) {
		return fmt.Errorf("a zone spread is broken")
	}
	if len(placed) != len(c.pods) {
		return fmt.Errorf("%d of %d pending pods placed", len(placed), len(c.pods))
	}
	if math.Abs(total-plan.PricePerHour) > 1e-9 {
		return fmt.Errorf("plan price %.4f, but its nodes cost %.4f", plan.PricePerHour, total)
	}
	return nil
}
