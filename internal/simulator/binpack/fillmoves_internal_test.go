package binpack

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
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
