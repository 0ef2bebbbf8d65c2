package binpack

import (
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// The moves of improve take pods off nodes and put them elsewhere, and
// check each moved pod at its new place. Taking a pod away can break a
// pod that stays: one whose required pod affinity it satisfied, or whose
// spread it balanced. kube-scheduler checks each pod with every other one
// in place, so a move is kept only when every placed pending pod with
// such a term would still be accepted where it is.

// holds reports whether every pending pod placed in this plan whose
// required pod affinity or spread another pod's move can break still
// passes the filters on its node with the other pods in place, and
// whether the plan leaves one more pod of each class with hardSpreads
// somewhere to go, if the greedy plan did (deadend.go). It tries each
// such pod by taking it off in a fork (reverted), so the snapshot is
// left as it was. O(pods with such terms x filters).
func (p *packer) holds() bool {
	for _, pod := range p.pending {
		if pod.Node != nil && dependsOnOthers(pod.Class) && !p.fitsWithout(pod) {
			return false
		}
	}
	for _, c := range p.hard {
		if !p.deadAfterGreedy[c] && !p.nextFits(c, 0) {
			return false
		}
	}
	return true
}

// dependsOnOthers reports whether a pod of class c can stop fitting where
// it is when another pod leaves: it needs a pod nearby (required pod
// affinity) or a balance across domains (a spread constraint).
func dependsOnOthers(c *snapshot.Class) bool {
	return len(c.Affinity) > 0 || len(c.Spread) > 0
}

// fitsWithout reports whether placed pod q passes the filters on its node
// with every other pod in place (the snapshot is left as it was).
func (p *packer) fitsWithout(q *snapshot.Pod) bool {
	n, ok := q.Node, false
	_ = p.s.WithFork(func() (bool, error) {
		p.s.RemovePod(q)
		ok = !predicates.Run(p.in.Filters, p.s, q.Class, n).Failed()
		return false, nil
	})
	return ok
}
