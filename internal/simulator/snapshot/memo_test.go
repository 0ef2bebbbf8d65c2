package snapshot_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// memoNodes are the nodes of TestMemoBuildsTheSameSnapshot's cluster.
var memoNodes = []string{"n0", "n1", "n2"}

// TestMemoBuildsTheSameSnapshot builds a snapshot per round of a changing
// cluster, as a controller does from its informer cache (a changed pod is
// a new object, an unchanged one the same), once with a memo carried
// across rounds and once without, and checks that a caller sees the same
// snapshot every round: the memo only saves work.
func TestMemoBuildsTheSameSnapshot(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			var in snapshot.Input
			for i, z := range []string{"zone-a", "zone-a", "zone-b"} {
				in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: b.Node(memoNodes[i], "8", "16Gi", b.NodeLabels(v1alpha1.LabelZone, z)), NodeGroup: "g"})
			}
			in.DRA = draInput(memoNodes...)
			var pods []*corev1.Pod
			next := 0
			bound := func(p *corev1.Pod) *corev1.Pod {
				p.UID = types.UID(p.Name)
				p.ResourceVersion = fmt.Sprint(r.Intn(1000))
				p.Spec.NodeName = memoNodes[r.Intn(len(memoNodes))]
				p.Status.Phase = corev1.PodRunning
				return p
			}
			for range 6 {
				pods = append(pods, bound(placeable(r, next)))
				next++
			}
			memo := snapshot.NewMemo()
			for round := range 12 {
				pods = churn(r, pods, bound, &next)
				in.Pods = pods
				fresh := build(t, in)
				in.Memo = memo
				memoed := build(t, in)
				in.Memo = nil
				if diff := cmp.Diff(observe(t, fresh, classify(t, fresh)), observe(t, memoed, classify(t, memoed))); diff != "" {
					t.Fatalf("round %d: the snapshot built with the memo differs (-without +with):\n%s", round, diff)
				}
				if len(fresh.Classes()) != len(memoed.Classes()) {
					t.Fatalf("round %d: %d classes without the memo, %d with", round, len(fresh.Classes()), len(memoed.Classes()))
				}
			}
			if memo.Hits == 0 {
				t.Errorf("the memo was never used (%d misses)", memo.Misses)
			}
		})
	}
}

// churn changes the pods as a cluster does between two rounds: some pods
// go, some come, some change (labels, requests, node: a new object with
// the same name and UID), the rest stay the same objects.
func churn(r *rand.Rand, pods []*corev1.Pod, bound func(*corev1.Pod) *corev1.Pod, next *int) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods)+2)
	for _, p := range pods {
		switch r.Intn(8) {
		case 0: // deleted
		case 1: // relabelled: now of another class
			c := p.DeepCopy()
			c.ResourceVersion += "+"
			c.Labels = map[string]string{"app": []string{"web", "db", "api"}[r.Intn(3)]}
			out = append(out, c)
		case 2: // moved to another node (rebound under the same name)
			c := bound(p.DeepCopy())
			c.ResourceVersion += "+"
			out = append(out, c)
		case 3: // held on another node in memory (a nominated pod's copy)
			c := p.DeepCopy()
			c.Spec.NodeName = memoNodes[r.Intn(len(memoNodes))]
			out = append(out, c)
		case 4: // unchanged, read as a fresh copy
			out = append(out, p.DeepCopy())
		default:
			out = append(out, p)
		}
	}
	for range r.Intn(3) {
		out = append(out, bound(placeable(r, *next)))
		*next++
	}
	return out
}

func build(t *testing.T, in snapshot.Input) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.New(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func classify(t *testing.T, s *snapshot.Snapshot) []*snapshot.Class {
	t.Helper()
	var out []*snapshot.Class
	for _, p := range probes() {
		c, err := s.Classify(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Prepare(c)
		out = append(out, c)
	}
	return out
}
