package scaleup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// linearGroup is a node group of types of 1 to 48 cpu (4 GiB each),
// on demand in the zones, priced 1 per cpu.
func linearGroup(name string, zones ...string) *v1alpha1.NodeGroup {
	opts := []b.NodeGroupOption{b.Size(0, 100)}
	for _, cpu := range []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48} {
		var offerings []v1alpha1.Offering
		for _, z := range zones {
			offerings = append(offerings, b.OnDemand(z, fmt.Sprintf("%d.00", cpu)))
		}
		opts = append(opts, b.InstanceType(fmt.Sprintf("c%d", cpu), fmt.Sprint(cpu), fmt.Sprintf("%dGi", 4*cpu), offerings...))
	}
	return b.NodeGroup(name, opts...)
}

// TestPodsThatCanGoAnywhereFillTheNodesOfPodsThatCannotShare: 24 pods
// of 200m that may not share a node (anti-affinity) and 72 pods of 500m
// that may go anywhere, on types of 1 to 48 cpu priced by the cpu. Each
// node of a solo pod wastes at least 300m (200m plus an odd number of
// 500m pods leaves 300m of a whole cpu, an even number 800m), so no plan
// costs less than 40.8 + 24 x 0.3 = 48 cpu: every solo pod with three of
// the others on a 2-cpu node, for instance. The greedy pass piles the 72
// on one large node and opens a 1-cpu node per solo pod (72 + 24); the
// round is larger than the one where the merges and repacks run.
func TestPodsThatCanGoAnywhereFillTheNodesOfPodsThatCannotShare(t *testing.T) {
	ng := linearGroup("linear", "zone-a")
	solo := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}}
	var pending []*corev1.Pod
	for i := range 24 {
		pending = append(pending, b.Pod(fmt.Sprintf("solo-%02d", i), b.CPU("200m"), b.Memory("64Mi"), b.Labels("app", "solo"), b.PodAntiAffinity(solo)))
	}
	for i := range 72 {
		pending = append(pending, b.Pod(fmt.Sprintf("web-%02d", i), b.CPU("500m"), b.Memory("64Mi"), b.Labels("app", "web")))
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %+v", plan.Unschedulable)
	}
	if plan.PricePerHour > 48+1e-9 {
		t.Errorf("plan costs %.2f, want the optimum 48.00:\n%v", plan.PricePerHour, summary(plan))
	}
}

// TestFillKeepsSpreadsAndAffinityAcrossZones: the pods that fill could
// move into the room of solo pods' nodes in zone-b are spread over the
// zones (maxSkew 1) or must share a zone with each other (required
// affinity). Moving them across zones would break both; the plan keeps
// the spread within its skew and each affinity group in one zone, and
// still fills the solo nodes from the pods of zone-b.
func TestFillKeepsSpreadsAndAffinityAcrossZones(t *testing.T) {
	ng := linearGroup("zones", "zone-a", "zone-b")
	solo := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}}
	together := corev1.PodAffinityTerm{TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}}
	var pending []*corev1.Pod
	for i := range 24 {
		pending = append(pending, b.Pod(fmt.Sprintf("solo-%02d", i), b.CPU("200m"), b.Memory("64Mi"), b.Labels("app", "solo"),
			b.PodAntiAffinity(solo), b.NodeSelector(corev1.LabelTopologyZone, "zone-b")))
	}
	for i := range 60 {
		pending = append(pending, b.Pod(fmt.Sprintf("web-%02d", i), b.CPU("500m"), b.Memory("64Mi"), b.Labels("app", "web"),
			b.Spread(corev1.LabelTopologyZone, 1, "app", "web")))
	}
	for i := range 30 {
		pending = append(pending, b.Pod(fmt.Sprintf("batch-%02d", i), b.CPU("500m"), b.Memory("64Mi"), b.Labels("app", "batch"),
			b.PodAffinity(together)))
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %+v", plan.Unschedulable)
	}
	web, batch := map[string]int{}, map[string]int{}
	var soloNodes, filled int
	for _, n := range plan.NewNodes {
		hasSolo, others := false, 0
		for _, p := range n.Pods {
			switch p.Name[:3] {
			case "web":
				web[n.Zone]++
				others++
			case "bat":
				batch[n.Zone]++
				others++
			default:
				hasSolo = true
			}
		}
		if hasSolo {
			soloNodes++
			if others > 0 {
				filled++
			}
		}
	}
	if d := web["zone-a"] - web["zone-b"]; d > 1 || d < -1 {
		t.Errorf("web pods per zone %v: skew %d, want at most 1", web, d)
	}
	if len(batch) != 1 {
		t.Errorf("batch pods per zone %v, want all in one zone", batch)
	}
	if soloNodes != 24 || filled < 12 {
		t.Errorf("%d solo nodes, %d of them holding other pods; want 24, at least 12 filled from zone-b:\n%v", soloNodes, filled, summary(plan))
	}
}

// TestFillKeepsThePodsAPodNeedsOnItsNode: each "a" pod requires an "b"
// pod on its node (pod affinity by hostname); the greedy pass puts them
// together on one large node, next to small nodes of solo pods with
// room. fill may move b pods away, but never the last one an a pod
// needs: every a pod ends on a node with a b pod.
func TestFillKeepsThePodsAPodNeedsOnItsNode(t *testing.T) {
	ng := linearGroup("pairs", "zone-a")
	solo := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}}
	withB := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}
	var pending []*corev1.Pod
	for i := range 24 {
		pending = append(pending, b.Pod(fmt.Sprintf("solo-%02d", i), b.CPU("200m"), b.Memory("64Mi"), b.Labels("app", "solo"), b.PodAntiAffinity(solo)))
	}
	for i := range 36 {
		pending = append(pending, b.Pod(fmt.Sprintf("b-%02d", i), b.CPU("500m"), b.Memory("64Mi"), b.Labels("app", "b")),
			b.Pod(fmt.Sprintf("a-%02d", i), b.CPU("500m"), b.Memory("64Mi"), b.Labels("app", "a"), b.PodAffinity(withB)))
	}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %+v", plan.Unschedulable)
	}
	for _, n := range plan.NewNodes {
		var a, bs int
		for _, p := range n.Pods {
			switch p.Name[:2] {
			case "a-":
				a++
			case "b-":
				bs++
			}
		}
		if a > 0 && bs == 0 {
			t.Errorf("node %s holds %d a pods and no b pod:\n%v", n.Name, a, summary(plan))
		}
	}
}
