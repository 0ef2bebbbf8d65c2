package scaleup

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Followers form chains: b follows a, c follows b (each requires the one
// before on its node), and all of them go where the first goes, the root
// of the chain. A follower folds into its root, not into its leader: a
// follower folded into another follower would take its requests with it
// out of the plan. A folded follower is not in the plan's snapshot, so
// that no other pod can see it: a follower folds only when no other pod's
// term (pod affinity, anti-affinity, a spread constraint) selects it, save
// its own followers, which fold with it, and only when it has no terms of
// its own that the fold would lose (anti-affinity, spread, host ports)
// and asks for nothing but cpu and memory (what a companion add-on
// carries). Everything else is planned as it is, pod by pod. Either way a
// root is planned only where its followers may go (narrow), when some
// node could be there: a follower planned pod by pod after a root planned
// where it may not run (another zone than its volume's) would wait for
// ever.

// chain is the outcome of deciding the chains: the root each folded
// follower goes with, and each root as planned (narrowed to where all its
// followers may run).
type chain struct {
	rootOf   map[*corev1.Pod]*corev1.Pod
	narrowed map[*corev1.Pod]*corev1.Pod
}

// chains decides which followers fold and into which root. leaderOf maps
// each follower to its leader. It starts from every follower that could
// fold and drops, until nothing changes, those that another pod sees,
// that are on a cycle, whose root carries a companion add-on already, or
// whose node constraints cannot be combined with their root's. Then the
// followers that do not fold narrow their roots too, where they can.
//
// placeable tells whether a pod could get a node at all (an existing one,
// or one launched from a template): a narrowing that would leave the
// root none is not made (the follower is not folded, or, not folded, does
// not narrow), so a follower that can go nowhere leaves its leader as it
// is, as kube-scheduler would run the leader and leave the follower
// waiting.
func chains(leaderOf map[*corev1.Pod]*corev1.Pod, pending, bound []*corev1.Pod, vols snapshot.Volumes, placeable func(*corev1.Pod) bool) chain {
	in := map[*corev1.Pod]bool{}
	sels := map[*corev1.Pod][]*corev1.NodeSelector{} // nil for a follower whose volume takes it nowhere
	for f := range leaderOf {
		s, why := vols.Selectors(f)
		if why == "" {
			sels[f] = s
		}
		in[f] = why == "" && foldable(f, vols)
	}
	for {
		c := chain{rootOf: map[*corev1.Pod]*corev1.Pod{}, narrowed: map[*corev1.Pod]*corev1.Pod{}}
		dropped := false
		for _, f := range sortedFollowers(leaderOf) {
			if !in[f] {
				continue
			}
			r := rootOf(f, leaderOf, in)
			if r == nil || hasAddOn(r) || seen(f, leaderOf, in, pending, bound) {
				in[f], dropped = false, true
				continue
			}
			c.rootOf[f] = r
		}
		if dropped {
			continue
		}
		for _, f := range sortedFollowers(leaderOf) {
			r := c.rootOf[f]
			if r == nil {
				continue
			}
			have := c.narrowed[r]
			if have == nil {
				have = r
			}
			n, ok := narrow(have, f, sels[f])
			if !ok || n != have && !placeable(n) {
				in[f], dropped = false, true
				break
			}
			c.narrowed[r] = n
		}
		if !dropped {
			narrowByOthers(c, leaderOf, in, sels, placeable)
			return c
		}
	}
}

// narrowByOthers narrows the root of each follower that does not fold to
// where that follower may go too: its leader, or the root its leader
// folds into. A follower whose constraints cannot be combined with the
// root's (or whose volume takes it nowhere) leaves the root as it is.
func narrowByOthers(c chain, leaderOf map[*corev1.Pod]*corev1.Pod, in map[*corev1.Pod]bool, sels map[*corev1.Pod][]*corev1.NodeSelector,
	placeable func(*corev1.Pod) bool) {
	for _, f := range sortedFollowers(leaderOf) {
		if _, resolved := sels[f]; in[f] || !resolved { // folded, or its volume takes it nowhere
			continue
		}
		r := leaderOf[f]
		if in[r] {
			if r = c.rootOf[r]; r == nil {
				continue
			}
		}
		have := c.narrowed[r]
		if have == nil {
			have = r
		}
		if n, ok := narrow(have, f, sels[f]); ok && (n == have || placeable(n)) {
			c.narrowed[r] = n
		}
	}
}

// rootOf is the first pod up f's chain of leaders that does not fold, or
// nil when the chain is a cycle.
func rootOf(f *corev1.Pod, leaderOf map[*corev1.Pod]*corev1.Pod, in map[*corev1.Pod]bool) *corev1.Pod {
	l := leaderOf[f]
	for range len(leaderOf) {
		if !in[l] {
			return l
		}
		l = leaderOf[l]
	}
	return nil
}

// hasAddOn reports whether a pod carries a companion add-on already (a
// CompanionProfile's workload): its followers are planned as they are.
func hasAddOn(p *corev1.Pod) bool {
	_, has := p.Annotations[v1alpha1.AnnotationCompanionRequests]
	return has
}

// foldable reports whether folding f into its root loses nothing of f's
// own: its only term is the affinity to its leader, it binds no host port,
// asks for nothing but cpu and memory, and has no device claim, no
// inline CSI volume (whose attach limit applies to it) and no claim one
// pod at a time may use (ReadWriteOncePod). Its claims' zones and node
// affinity narrow its root (narrow), as its node selection does.
func foldable(f *corev1.Pod, vols snapshot.Volumes) bool {
	if len(f.Spec.ResourceClaims) > 0 || vols.OncePodClaims(f) {
		return false
	}
	for _, v := range f.Spec.Volumes {
		if v.CSI != nil {
			return false
		}
	}
	if a := f.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return false
	}
	for _, c := range f.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return false
		}
	}
	for _, cs := range [][]corev1.Container{f.Spec.InitContainers, f.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					return false
				}
			}
		}
	}
	for name := range resource.PodRequests(f, resource.PodResourcesOptions{}) {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			return false
		}
	}
	return true
}

// seen reports whether a pod other than f's folding followers selects f
// in a required term: a pending pod's pod affinity, anti-affinity or
// DoNotSchedule spread, or a bound pod's anti-affinity. Terms with a
// namespace selector are taken to select every namespace (the planner
// does not know namespace labels here), so that in doubt f stays visible.
func seen(f *corev1.Pod, leaderOf map[*corev1.Pod]*corev1.Pod, in map[*corev1.Pod]bool, pending, bound []*corev1.Pod) bool {
	for _, q := range pending {
		if q == f || (in[q] && leaderOf[q] == f) {
			continue
		}
		if podutil.RequiredTermSelects(q, f, true) {
			return true
		}
	}
	for _, q := range bound {
		if podutil.RequiredTermSelects(q, f, false) {
			return true
		}
	}
	return false
}
