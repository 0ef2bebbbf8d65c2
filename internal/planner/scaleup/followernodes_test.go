package scaleup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

func term(key string, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}
}

func podWith(selector map[string]string, terms []corev1.NodeSelectorTerm, tolerations ...corev1.Toleration) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: selector, Tolerations: tolerations}}
	if terms != nil {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	return p
}

// TestNarrowALeaderToWhereItsFollowerMayGo: a follower folded into its
// leader goes where the leader goes, so the leader is planned only where
// the follower may run too.
func TestNarrowALeaderToWhereItsFollowerMayGo(t *testing.T) {
	dedicated := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	anything := corev1.Toleration{Operator: corev1.TolerationOpExists}
	tests := []struct {
		name           string
		leader, follow *corev1.Pod
		want           *corev1.Pod // nil: not folded
	}{
		{"a follower without constraints leaves the leader as it is",
			podWith(map[string]string{"pool": "a"}, nil, dedicated), podWith(nil, nil, dedicated),
			podWith(map[string]string{"pool": "a"}, nil, dedicated)},
		{"the follower's node selector is added",
			podWith(map[string]string{"zone": "z1"}, nil), podWith(map[string]string{"pool": "special"}, nil),
			podWith(map[string]string{"zone": "z1", "pool": "special"}, nil)},
		{"a node-selector key with two values cannot be combined",
			podWith(map[string]string{"pool": "cheap"}, nil), podWith(map[string]string{"pool": "special"}, nil),
			nil},
		{"required node-affinity terms are combined pairwise",
			podWith(nil, []corev1.NodeSelectorTerm{term("zone", "z1"), term("zone", "z2")}), podWith(nil, []corev1.NodeSelectorTerm{term("arch", "arm64")}),
			podWith(nil, []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{term("zone", "z1").MatchExpressions[0], term("arch", "arm64").MatchExpressions[0]}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{term("zone", "z2").MatchExpressions[0], term("arch", "arm64").MatchExpressions[0]}},
			})},
		{"a follower's terms alone become the leader's",
			podWith(nil, nil), podWith(nil, []corev1.NodeSelectorTerm{term("arch", "arm64")}),
			podWith(nil, []corev1.NodeSelectorTerm{term("arch", "arm64")})},
		{"the leader keeps only the tolerations the follower has too",
			podWith(nil, nil, dedicated, anything), podWith(nil, nil),
			podWith(nil, nil)},
		{"a follower that tolerates everything keeps all of the leader's",
			podWith(nil, nil, dedicated), podWith(nil, nil, anything),
			podWith(nil, nil, dedicated)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := narrow(tt.leader, tt.follow, nil)
			if tt.want == nil {
				if ok {
					t.Fatalf("folded into %+v, want not folded", got.Spec)
				}
				return
			}
			if !ok {
				t.Fatal("not folded")
			}
			if diff := cmp.Diff(tt.want.Spec, got.Spec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("narrowed leader (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTermsNoNodeCanMeetAreLeftOut: the pairs of two selections that
// require a key and its absence, or disjoint values of it, are left out
// of their AND; when every pair is such, the AND is refused.
func TestTermsNoNodeCanMeetAreLeftOut(t *testing.T) {
	in := func(k string, v ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: k, Operator: corev1.NodeSelectorOpIn, Values: v}}}
	}
	absent := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpDoesNotExist}}}
	got, ok := andTerms([]corev1.NodeSelectorTerm{in("zone", "a"), absent}, []corev1.NodeSelectorTerm{in("zone", "a", "b"), absent})
	if !ok || len(got) != 2 {
		t.Errorf("AND of (zone a | no zone) and (zone a,b | no zone): %d terms %v, want 2 (zone a; no zone)", len(got), got)
	}
	if _, ok := andTerms([]corev1.NodeSelectorTerm{in("zone", "a")}, []corev1.NodeSelectorTerm{in("zone", "b"), absent}); ok {
		t.Error("AND of zone a and (zone b | no zone) was accepted: no node meets it")
	}
}
