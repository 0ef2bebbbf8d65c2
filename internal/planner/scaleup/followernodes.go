package scaleup

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// maxAffinityTerms bounds the node-affinity terms a leader narrowed by a
// follower may get (the terms of both are ORed, so narrowing multiplies
// them); past it the follower is not folded.
const maxAffinityTerms = 16

// narrow returns a copy of leader l that may go only where follower f may
// go too: f's node selector added, the required node-affinity terms of
// both combined (every pair, ANDed) with those of f's bound volumes (vols
// of f: a PersistentVolume's zone and node affinity), and only the
// tolerations of l that f has as well. ok is false when they cannot be
// combined (a node-selector key with two values, too many terms): then f
// is not folded.
func narrow(l, f *corev1.Pod, vols []*corev1.NodeSelector) (*corev1.Pod, bool) {
	fReq := requiredTerms(f)
	if len(f.Spec.NodeSelector) == 0 && fReq == nil && len(vols) == 0 && tolerates(f.Spec.Tolerations, l.Spec.Tolerations) {
		return l, true // nothing narrower
	}
	c := l.DeepCopy()
	for k, v := range f.Spec.NodeSelector {
		if have, ok := c.Spec.NodeSelector[k]; ok && have != v {
			return nil, false
		}
		if c.Spec.NodeSelector == nil {
			c.Spec.NodeSelector = map[string]string{}
		}
		c.Spec.NodeSelector[k] = v
	}
	if fReq != nil || len(vols) > 0 {
		terms := requiredTerms(l)
		for _, req := range append([][]corev1.NodeSelectorTerm{fReq}, selectorTerms(vols)...) {
			if req == nil {
				continue
			}
			var ok bool
			if terms, ok = andTerms(terms, req); !ok {
				return nil, false
			}
		}
		if c.Spec.Affinity == nil {
			c.Spec.Affinity = &corev1.Affinity{}
		}
		if c.Spec.Affinity.NodeAffinity == nil {
			c.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		c.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	}
	c.Spec.Tolerations = slices.DeleteFunc(c.Spec.Tolerations, func(t corev1.Toleration) bool {
		return !tolerates(f.Spec.Tolerations, []corev1.Toleration{t})
	})
	return c, true
}

// selectorTerms are the terms of each selection, a list each.
func selectorTerms(sels []*corev1.NodeSelector) [][]corev1.NodeSelectorTerm {
	out := make([][]corev1.NodeSelectorTerm, 0, len(sels))
	for _, s := range sels {
		out = append(out, s.NodeSelectorTerms)
	}
	return out
}

func requiredTerms(p *corev1.Pod) []corev1.NodeSelectorTerm {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// andTerms combines two ORed lists of terms into the ORed list of their
// pairwise ANDs, leaving out the pairs no node can match (a key both
// required and required absent, or required in disjoint sets of values:
// a volume's zone selection pairs its beta label, its GA label and "no
// topology label at all" with those of the next selection); an empty
// list is no constraint.
func andTerms(a, b []corev1.NodeSelectorTerm) ([]corev1.NodeSelectorTerm, bool) {
	if len(a) == 0 {
		return b, len(b) <= maxAffinityTerms
	}
	if len(a)*len(b) > maxAffinityProducts {
		return nil, false
	}
	var out []corev1.NodeSelectorTerm
	for _, x := range a {
		for _, y := range b {
			t := corev1.NodeSelectorTerm{
				MatchExpressions: append(slices.Clone(x.MatchExpressions), y.MatchExpressions...),
				MatchFields:      append(slices.Clone(x.MatchFields), y.MatchFields...),
			}
			if !contradicts(t.MatchExpressions) {
				out = append(out, t)
			}
		}
	}
	if len(out) == 0 {
		return nil, false // nowhere: not narrowed, as too many terms
	}
	return out, len(out) <= maxAffinityTerms
}

// maxAffinityProducts bounds the pairs andTerms looks at before it
// leaves out those no node matches.
const maxAffinityProducts = 256

// contradicts reports whether no node's labels can meet every
// requirement: a key required (In, Exists) and required absent
// (DoesNotExist), or required In two sets with no value in common.
func contradicts(reqs []corev1.NodeSelectorRequirement) bool {
	for i, r := range reqs {
		for _, q := range reqs[i+1:] {
			if r.Key != q.Key {
				continue
			}
			present := func(o corev1.NodeSelectorOperator) bool {
				return o == corev1.NodeSelectorOpIn || o == corev1.NodeSelectorOpExists
			}
			switch {
			case present(r.Operator) && q.Operator == corev1.NodeSelectorOpDoesNotExist,
				present(q.Operator) && r.Operator == corev1.NodeSelectorOpDoesNotExist:
				return true
			case r.Operator == corev1.NodeSelectorOpIn && q.Operator == corev1.NodeSelectorOpIn &&
				!slices.ContainsFunc(r.Values, func(v string) bool { return slices.Contains(q.Values, v) }):
				return true
			}
		}
	}
	return false
}

// tolerates reports whether tolerations have every toleration of want
// (as a taint it would tolerate: its key, value and effect). A toleration
// of every taint (empty key, Exists) is had only by the same.
func tolerates(tolerations, want []corev1.Toleration) bool {
	for _, w := range want {
		if w.Key == "" && w.Operator == corev1.TolerationOpExists {
			if !slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return equality.Semantic.DeepEqual(t, w) }) {
				return false
			}
			continue
		}
		effects := []corev1.TaintEffect{w.Effect}
		if w.Effect == "" {
			effects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
		}
		for _, e := range effects {
			taint := corev1.Taint{Key: w.Key, Value: w.Value, Effect: e}
			if !v1helper.TolerationsTolerateTaint(klog.Background(), tolerations, &taint, snapshot.TolerationComparisonOperators) {
				return false
			}
		}
	}
	return true
}
