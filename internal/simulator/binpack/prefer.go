package binpack

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Price decides first; preferences decide where price does not. A pod's
// soft terms (preferred node affinity, ScheduleAnyway spread, taints it
// would rather avoid) are what kube-scheduler scores, and the planner
// follows them when it chooses among templates, or among a planned node's
// options, that cost the same: it scores the tied candidates as
// kube-scheduler's default profile scores nodes (each plugin's score
// normalized to 0-100 over the candidates, then weighed: NodeAffinity 2,
// TaintToleration 3, PodTopologySpread 2) and takes the highest. A
// preference never buys a dearer node.
//
// Where neither price nor preference decides, the templates of one node
// group (its zones, on most catalogues) take turns: the one the greedy
// pass opened fewest nodes from this round is taken, so that the nodes a
// round opens spread over the zones and each zone's pods (a zone
// spread's share, say) find small nodes of other pods to share. Turns
// count only this round's nodes: a round that opens one node opens it
// in the first zone. Of several groups the first by name (Run sorts
// them) keeps the pods: a user ranks groups by weight.

// Score weights of kube-scheduler's default profile.
const (
	weightNodeAffinity    = 2
	weightTaintToleration = 3
	weightSpread          = 2
)

// tied reports whether two prices are equal for the planner.
func tied(a, b float64) bool { return math.Abs(a-b) <= minSaving }

// preferredTemplate returns the template of cands (tied on weight and
// price for a pod of class c, each with the options that fit it) that a
// pod of c prefers.
func (p *packer) preferredTemplate(c *snapshot.Class, cands []*Template, opts [][]*snapshot.Option) int {
	if len(cands) < 2 {
		return 0
	}
	if !c.HasPreferences() && !hasSoftTaint(cands) {
		return p.leastOpened(cands, nil)
	}
	na := make([]float64, len(cands))
	tt := make([]float64, len(cands))
	sp := make([]float64, len(cands))
	for i, t := range cands {
		na[i] = float64(bestAffinityScore(c, cheapestOf(opts[i])))
		tt[i] = float64(intolerable(t.Node.Taints, c.Tolerations))
		sp[i] = float64(p.softSpreadCount(c, t.Node))
	}
	scores := combine(na, tt, sp)
	return p.leastOpened(cands, scores)
}

// leastOpened returns the index of the candidate the greedy pass opened
// fewest nodes from, among those of the highest score (all when scores is
// nil) and of the first such candidate's node group: the templates of one
// group take turns, while of several groups the first keeps the pods.
// The first on a tie.
func (p *packer) leastOpened(cands []*Template, scores []float64) int {
	best, top := -1, 0.0
	if scores != nil {
		top = scores[argmax(scores)]
	}
	for i, t := range cands {
		switch {
		case scores != nil && scores[i] < top:
		case best < 0:
			best = i
		case t.Group == cands[best].Group && p.opened[t] < p.opened[cands[best]]:
			best = i
		}
	}
	return best
}

// preferredOption returns the option of planned node n that it is
// launched as: the cheapest within the limits, among those the
// preferred node affinity of its pods ranks highest, then the smallest.
func (p *packer) preferredOption(n *snapshot.Node) *snapshot.Option {
	cheapest := snapshot.Cheapest(n.Flex.Options)
	if cheapest == nil || !podsPrefer(n) {
		return cheapest
	}
	h := p.s.LimitRoomOf(n)
	best, bestScore := cheapest, nodeAffinityScore(n, cheapest)
	for _, o := range n.Flex.Options {
		if o == cheapest || !tied(o.Price, cheapest.Price) || !h.AllowsOption(o) {
			continue
		}
		if s := nodeAffinityScore(n, o); s > bestScore || (s == bestScore && o.Allocatable.MilliCPU < best.Allocatable.MilliCPU) {
			best, bestScore = o, s
		}
	}
	return best
}

// podsPrefer reports whether a pod on n has preferred node affinity.
func podsPrefer(n *snapshot.Node) bool {
	for _, pod := range n.Pods {
		if pod.Class.Preferred != nil {
			return true
		}
	}
	return false
}

// nodeAffinityScore sums the preferred node affinity of n's pods on the
// node option o makes.
func nodeAffinityScore(n *snapshot.Node, o *snapshot.Option) int64 {
	var s int64
	for _, pod := range n.Pods {
		if pod.Class.Preferred != nil {
			s += pod.Class.Preferred.Score(o.Node)
		}
	}
	return s
}

// cheapestOf returns the options of opts at the lowest price.
func cheapestOf(opts []*snapshot.Option) []*snapshot.Option {
	low := snapshot.Cheapest(opts)
	var out []*snapshot.Option
	for _, o := range opts {
		if low != nil && tied(o.Price, low.Price) {
			out = append(out, o)
		}
	}
	return out
}

// bestAffinityScore is the highest preferred node affinity score of class
// c over the nodes the options make.
func bestAffinityScore(c *snapshot.Class, opts []*snapshot.Option) int64 {
	if c.Preferred == nil {
		return 0
	}
	var best int64
	for _, o := range opts {
		best = max(best, c.Preferred.Score(o.Node))
	}
	return best
}

// softSpreadCount is how many pods the ScheduleAnyway constraints of class
// c count in the domains of node n (fewer is better).
func (p *packer) softSpreadCount(c *snapshot.Class, n *snapshot.Node) int {
	total := 0
	for i := range c.SoftSpread {
		k := c.SoftCounter(i)
		if v, ok := n.Labels()[k.Key()]; ok {
			total += k.Count(k.Key(), v)
		}
	}
	return total
}

// hasSoftTaint reports whether a candidate carries a PreferNoSchedule
// taint, so that even a pod without soft terms of its own has a
// preference among them.
func hasSoftTaint(cands []*Template) bool {
	for _, t := range cands {
		for _, taint := range t.Node.Taints {
			if taint.Effect == corev1.TaintEffectPreferNoSchedule {
				return true
			}
		}
	}
	return false
}

// intolerable counts the PreferNoSchedule taints the tolerations do not
// tolerate, as kube-scheduler's TaintToleration score does.
func intolerable(taints []corev1.Taint, tolerations []corev1.Toleration) int {
	n := 0
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !v1helper.TolerationsTolerateTaint(klog.Background(), tolerations, t, snapshot.TolerationComparisonOperators) {
			n++
		}
	}
	return n
}

// combine normalizes each plugin's raw scores over the candidates as
// kube-scheduler does (node affinity: more is better; taints and spread
// counts: fewer is better) and weighs them.
func combine(na, tt, sp []float64) []float64 {
	out := make([]float64, len(na))
	maxNA, maxTT := maxOf(na), maxOf(tt)
	minSP, maxSP := -maxOf(neg(sp)), maxOf(sp)
	for i := range out {
		var a, t, s float64 = 0, 100, 100
		if maxNA > 0 {
			a = 100 * na[i] / maxNA
		}
		if maxTT > 0 {
			t = 100 - 100*tt[i]/maxTT
		}
		if maxSP > minSP {
			s = 100 * (maxSP - sp[i]) / (maxSP - minSP)
		}
		out[i] = weightNodeAffinity*a + weightTaintToleration*t + weightSpread*s
	}
	return out
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func neg(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = -x
	}
	return out
}

// argmax returns the index of the highest value, the first on a tie.
func argmax(xs []float64) int {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best
}
