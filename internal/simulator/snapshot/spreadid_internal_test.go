package snapshot

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// manySpreads is a pending pod with n DoNotSchedule spreads, each on a
// key of its own (the API server admits any number).
func manySpreads(n int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "p"}}}
	for i := range n {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: fmt.Sprintf("example.com/key-%d", i), WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}}})
	}
	p.Spec.Containers = []corev1.Container{{Name: "c"}}
	return p
}

// TestSpreadCounterIDsStayShortWithManySpreads: the id of each spread
// counter names the class's whole set of spread keys; with the keys
// themselves in it, a pod of n spreads made n ids of n keys each, work
// and memory in n squared that a namespace user could push into the
// controller every round (8,000 spreads: 7 s and 700 MB). The ids stay
// the same short length whatever the number of spreads.
func TestSpreadCounterIDsStayShortWithManySpreads(t *testing.T) {
	lengths := map[int]int{}
	for _, n := range []int{2, 2000} {
		s, err := New(Input{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Classify(manySpreads(n))
		if err != nil {
			t.Fatal(err)
		}
		s.Prepare(c)
		if len(c.spreadCounters) != n {
			t.Fatalf("%d spread counters for %d spreads", len(c.spreadCounters), n)
		}
		longest := 0
		for _, k := range c.spreadCounters {
			longest = max(longest, len(k.signature))
		}
		lengths[n] = longest
	}
	if lengths[2000] > lengths[2]+8 { // key-1999 is a few characters longer than key-1
		t.Errorf("spread counter ids: %d bytes with 2 spreads, %d with 2,000; want the same length", lengths[2], lengths[2000])
	}
}

// BenchmarkPrepareManySpreads: registering the counters of a pod with
// 4,000 spreads (`go test -run '^$' -bench PrepareManySpreads
// ./internal/simulator/snapshot/`).
func BenchmarkPrepareManySpreads(b *testing.B) {
	pod := manySpreads(4000)
	for b.Loop() {
		s, err := New(Input{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := s.Classify(pod)
		if err != nil {
			b.Fatal(err)
		}
		s.Prepare(c)
	}
}
