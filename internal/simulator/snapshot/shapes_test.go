package snapshot_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestNodesOfShape: nodes share a shape when they differ only in name and
// hostname; another label value or a taint makes another shape; planned
// nodes have none; reverting an added node takes it out of its shape.
func TestNodesOfShape(t *testing.T) {
	in := snapshot.Input{}
	for _, n := range []*corev1.Node{
		b.Node("a-1", "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "a")),
		b.Node("b-1", "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "b")),
		b.Node("a-2", "8", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "a")),
		b.Node("a-tainted", "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "a"), b.NodeTaint("x", "y", corev1.TaintEffectNoSchedule)),
	} {
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
	}
	s, err := snapshot.New(in)
	if err != nil {
		t.Fatal(err)
	}
	shapes := func() map[string][]string {
		out := map[string][]string{}
		for _, n := range s.Nodes {
			for _, i := range s.NodesOfShape(n.Shape) {
				out[n.Name] = append(out[n.Name], s.Nodes[i].Name)
			}
		}
		return out
	}
	want := map[string][]string{"a-1": {"a-1", "a-2"}, "a-2": {"a-1", "a-2"}, "b-1": {"b-1"}, "a-tainted": {"a-tainted"}}
	if diff := cmp.Diff(want, shapes()); diff != "" {
		t.Fatalf("shapes (-want +got):\n%s", diff)
	}

	s.Fork()
	s.AddNode(&snapshot.Node{Node: b.Node("a-3", "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "a"))})
	s.AddNode(&snapshot.Node{Node: b.Node("planned", "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "a")), Planned: true})
	if got := s.NodesOfShape(s.Node("a-1").Shape); len(got) != 3 {
		t.Errorf("after adding a-3, shape of a-1 has %d nodes, want 3", len(got))
	}
	if sh := s.Node("planned").Shape; sh != 0 {
		t.Errorf("a planned node has shape %d, want none", sh)
	}
	s.Revert()
	if diff := cmp.Diff(want, shapes()); diff != "" {
		t.Errorf("after Revert, shapes (-want +got):\n%s", diff)
	}
}
