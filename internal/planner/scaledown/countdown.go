package scaledown

import "time"

// Countdown is, per node, since when it has been planned removable in a
// row of rounds: a node goes once its group's consolidateAfter has run
// (a controller's memory; after a restart a node waits again, the safe
// direction). A node that would be removable but is held back by
// something that is not about its pods' room counts too (Blocked.Waits:
// its group's budget, minSize or a hold, or a pod it waits to finish,
// its other pods having a home). As Cluster Autoscaler's unneeded time,
// the wait is the node's, not a turn in a queue: with a budget of one,
// idle nodes go one after another, not one consolidateAfter apart. The plan tries the nodes counting
// first (Input.Since), the longest first, so that a node whose
// neighbour's pod finished is not overtaken by it and its count lost.
type Countdown map[string]time.Time

// Follow brings the countdown up to date with a round's plan at now: the
// nodes it removes, replaces or holds back (Blocked.Waits) count from now
// if they did not count yet; every other node stops counting.
func (c Countdown) Follow(plan *Plan, now time.Time) {
	counting := map[string]bool{}
	start := func(name string) {
		counting[name] = true
		if _, ok := c[name]; !ok {
			c[name] = now
		}
	}
	for _, r := range plan.Remove {
		start(r.Node)
	}
	for _, r := range plan.Replace {
		for _, name := range r.Nodes {
			start(name)
		}
	}
	for _, b := range plan.Blocked {
		if b.Waits {
			start(b.Node)
		}
	}
	for name := range c {
		if !counting[name] {
			delete(c, name)
		}
	}
}

// byCountdown splits the candidates whose removal may start now into
// those due (their group's consolidateAfter has run, or is zero; every
// candidate when the plan is not told the countdown: an offline plan)
// and those still waiting. A waiting node is planned after the due ones
// and after a replacement, as a node waiting for its window is: it takes
// no room, budget or replacement from a removal that can start now
// (Karpenter does not consider a node before its consolidateAfter).
func (p *planner) byCountdown(cands []candidate) (due, waiting []candidate) {
	if p.since == nil || p.now.IsZero() {
		return cands, nil
	}
	for _, c := range cands {
		after := c.group.Spec.Disruption.After()
		switch {
		case retiring(c.group) || after <= 0 || !c.since.IsZero() && p.now.Sub(c.since) >= after:
			due = append(due, c)
		default:
			waiting = append(waiting, c)
		}
	}
	return due, waiting
}
