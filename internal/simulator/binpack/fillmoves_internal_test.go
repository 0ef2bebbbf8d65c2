package binpack

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// A move of fill keeps every count by a key wider than a node: it goes
// only between nodes of the same domain of each key a watcher counts by,
// a node without the label being a domain of its own; hostname counts
// are left to neighboursHold.
func TestSameDomainsKeepsAPodInTheDomainsItIsCountedIn(t *testing.T) {
	node := func(labels map[string]string) *snapshot.Node {
		return &snapshot.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}
	}
	zone, rack := corev1.LabelTopologyZone, "example.com/rack"
	a1 := node(map[string]string{zone: "a", rack: "1", corev1.LabelHostname: "n1"})
	a1b := node(map[string]string{zone: "a", rack: "1", corev1.LabelHostname: "n2"})
	a2 := node(map[string]string{zone: "a", rack: "2", corev1.LabelHostname: "n3"})
	b1 := node(map[string]string{zone: "b", rack: "1", corev1.LabelHostname: "n4"})
	noZone := node(map[string]string{rack: "1", corev1.LabelHostname: "n5"})
	emptyZone := node(map[string]string{zone: "", rack: "1", corev1.LabelHostname: "n6"})
	byZone := []watcher{{keys: []string{zone, corev1.LabelHostname}}}
	byZoneAndRack := []watcher{{keys: []string{zone}}, {keys: []string{rack}}}
	for _, c := range []struct {
		name     string
		ws       []watcher
		from, to *snapshot.Node
		want     bool
	}{
		{"another node of the zone", byZone, a1, a1b, true},
		{"another rack of the zone, counted by zone", byZone, a1, a2, true},
		{"another zone", byZone, a1, b1, false},
		{"a node without a zone", byZone, a1, noZone, false},
		{"from a node without a zone", byZone, noZone, a1, false},
		{"an empty zone is a domain, no zone is none", byZone, emptyZone, noZone, false},
		{"another rack, counted by rack too", byZoneAndRack, a1, a2, false},
		{"same zone and rack", byZoneAndRack, a1, a1b, true},
		{"nobody counts the pod", nil, a1, b1, true},
	} {
		if got := sameDomains(c.ws, c.from, c.to); got != c.want {
			t.Errorf("%s: sameDomains = %v, want %v", c.name, got, c.want)
		}
	}
}

// A spread counts only the nodes its pods' node selection admits
// (nodeAffinityPolicy Honor): a move between a counted node and one it
// does not count would change the spread's counts, in the same zone too.
func TestSameDomainsKeepsAPodOnNodesItsSpreadCountsAlike(t *testing.T) {
	pool := "example.com/pool"
	s, err := snapshot.New(snapshot.Input{Nodes: []snapshot.NodeInput{
		{Node: b.Node("a1", "4", "16Gi", b.NodeLabels(corev1.LabelTopologyZone, "a", pool, "web"))},
		{Node: b.Node("a2", "4", "16Gi", b.NodeLabels(corev1.LabelTopologyZone, "a", pool, "web"))},
		{Node: b.Node("a3", "4", "16Gi", b.NodeLabels(corev1.LabelTopologyZone, "a", pool, "batch"))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Classify(b.Pod("web", b.CPU("1"), b.Labels("app", "web"), b.NodeSelector(pool, "web"),
		b.Spread(corev1.LabelTopologyZone, 1, "app", "web")))
	if err != nil {
		t.Fatal(err)
	}
	s.Prepare(c)
	ws := []watcher{{k: c.SpreadCounter(0), keys: []string{corev1.LabelTopologyZone}, spread: true}}
	a1, a2, a3 := s.Node("a1"), s.Node("a2"), s.Node("a3")
	if !sameDomains(ws, a1, a2) {
		t.Error("a move between two nodes the spread counts was refused")
	}
	if sameDomains(ws, a1, a3) || sameDomains(ws, a3, a1) {
		t.Error("a move between a node the spread counts and one it does not was allowed")
	}
}

// A class whose move failed for every node of a zone is not tried in
// that zone again while the filler lasts, and still is in other zones,
// as other classes are in that zone; a failure on one node (by hostname,
// or with no domain) is remembered nowhere.
func TestAMoveThatFailedForAWholeZoneIsNotTriedThereAgain(t *testing.T) {
	node := func(zone, host string) *snapshot.Node {
		return &snapshot.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: host,
			Labels: map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelHostname: host}}}}
	}
	a1, a2, b1 := node("a", "n1"), node("a", "n2"), node("b", "n3")
	spread, other := &snapshot.Class{ID: 1}, &snapshot.Class{ID: 2}
	f := newFiller(&packer{})
	f.noteStuck(&snapshot.Pod{Class: other}, predicates.Domain{Key: corev1.LabelHostname, Value: "n1"})
	f.noteStuck(&snapshot.Pod{Class: other}, predicates.Domain{})
	if f.stuckIn(other, a1) || f.stuckIn(other, a2) {
		t.Fatal("a failure on one node kept the class off its zone")
	}
	f.noteStuck(&snapshot.Pod{Class: spread}, predicates.Domain{Key: corev1.LabelTopologyZone, Value: "a"})
	for _, c := range []struct {
		class *snapshot.Class
		n     *snapshot.Node
		want  bool
	}{{spread, a1, true}, {spread, a2, true}, {spread, b1, false}, {other, a1, false}} {
		if got := f.stuckIn(c.class, c.n); got != c.want {
			t.Errorf("class %d on %s: stuck %v, want %v", c.class.ID, c.n.Name, got, c.want)
		}
	}
}
