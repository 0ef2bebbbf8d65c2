package snapshot_test

import (
	"fmt"
	"testing"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPlacedPodsOfOneWorkloadShareAClass: the pods a snapshot is built
// with are classified without their node, so one workload on many nodes
// is one class (a class per node made a 1,000-node cluster hold 30,000
// classes); a pod to place that names its node is still its own class,
// and the NodeName filter keeps it there.
func TestPlacedPodsOfOneWorkloadShareAClass(t *testing.T) {
	var in snapshot.Input
	for i := range 50 {
		node := fmt.Sprintf("n%d", i)
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: b.Node(node, "4", "8Gi")})
		for j := range 3 {
			in.Pods = append(in.Pods, b.Pod(fmt.Sprintf("web-%d-%d", i, j), b.NodeName(node), b.Labels("app", "web"), b.CPU("100m")))
		}
	}
	s, err := snapshot.New(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Classes()); got != 1 {
		t.Errorf("150 pods of one workload on 50 nodes make %d classes, want 1", got)
	}
	pinned := b.Pod("pinned", b.NodeName("n7"), b.Labels("app", "web"), b.CPU("100m"))
	c, err := s.Classify(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Classes()) != 2 {
		t.Errorf("a pod to place shares a class with placed pods: %d classes", len(s.Classes()))
	}
	s.Prepare(c)
	if st := predicates.Run(predicates.Default(), s, c, s.Node("n8")); st.Reason != predicates.ReasonNodeName {
		t.Errorf("a pod naming n7 on n8: %q, want %q", st.Reason, predicates.ReasonNodeName)
	}
	if st := predicates.Run(predicates.Default(), s, c, s.Node("n7")); st.Failed() {
		t.Errorf("a pod naming n7 on n7: %q, want it to fit", st.Reason)
	}
}
