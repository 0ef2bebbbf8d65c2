package predicates_test

// Cases from kube-scheduler's own Filter test tables (k8s.io/kubernetes
// v1.36.3, pkg/scheduler/framework/plugins/...), varied where berth's
// verdict differed from kube-scheduler's: terms whose selectors print
// alike shared a counter, and matchLabelKeys were merged again with a
// pod's labels changed since admission. Each case names the upstream case
// it starts from; the fidelity module checks the same inputs against the
// real plugins.

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// verdicts builds a snapshot, prepares the pods' classes in order and
// returns the filters' status of the last pod on each node.
func verdicts(t *testing.T, nodes []*corev1.Node, placed []*corev1.Pod, namespaces []*corev1.Namespace, pods ...*corev1.Pod) map[string]predicates.Status {
	t.Helper()
	in := snapshot.Input{Pods: placed, Namespaces: namespaces}
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
	}
	s, err := snapshot.New(in)
	if err != nil {
		t.Fatal(err)
	}
	var c *snapshot.Class
	for _, p := range pods {
		if c, err = s.Classify(p); err != nil {
			t.Fatal(err)
		}
		s.Prepare(c)
	}
	out := map[string]predicates.Status{}
	for _, n := range s.Nodes {
		out[n.Name] = predicates.Run(predicates.Default(), s, c, n)
	}
	return out
}

func expect(t *testing.T, got map[string]predicates.Status, want map[string]bool) {
	t.Helper()
	for node, fits := range want {
		st := got[node]
		if st.Failed() == fits {
			t.Errorf("node %s: kube-scheduler fits=%v, berth fits=%v (%s)", node, fits, !st.Failed(), st.Message())
		}
	}
}

func antiTerm(key string, sel *metav1.LabelSelector) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel}
}

// Upstream: interpodaffinity/filtering_test.go, TestRequiredAffinitySingleNode
// "verify that PodAntiAffinity from existing pod is respected when pod has
// no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry
// with the existing pod", with the existing pod's term selecting every pod
// ({} labelSelector) and, on another node, a pod whose term has no
// labelSelector (selects nothing). Both selectors print as "", so the
// two terms share one existing-anti counter, read with the first pod's
// term.
func TestUpstreamExistingAntiAffinityEmptyVersusNilSelector(t *testing.T) {
	nodes := []*corev1.Node{
		b.Node("n1", "4", "8Gi", b.NodeLabels(zone, "zone-a")),
		b.Node("n2", "4", "8Gi", b.NodeLabels(zone, "zone-b")),
		b.Node("n3", "4", "8Gi", b.NodeLabels(zone, "zone-c")),
	}
	selectsNothing := b.Pod("quiet", b.NodeName("n2"), b.PodAntiAffinity(antiTerm(zone, nil)))
	selectsAll := b.Pod("loner", b.NodeName("n1"), b.PodAntiAffinity(antiTerm(zone, &metav1.LabelSelector{})))
	incoming := b.Pod("p", b.Labels("service", "securityscan"))
	// kube-scheduler: zone-a holds a pod whose anti-affinity selects every
	// pod of its namespace; zone-b's pod selects none.
	want := map[string]bool{"n1": false, "n2": true, "n3": true}
	t.Run("the pod selecting nothing is read first", func(t *testing.T) {
		expect(t, verdicts(t, nodes, []*corev1.Pod{selectsNothing, selectsAll}, nil, incoming), want)
	})
	t.Run("the pod selecting every pod is read first", func(t *testing.T) {
		expect(t, verdicts(t, nodes, []*corev1.Pod{selectsAll, selectsNothing}, nil, incoming), want)
	})
}

// Upstream: interpodaffinity/filtering_test.go, TestRequiredAffinitySingleNode
// "anti-affinity with matching all NamespaceSelector" (an empty
// namespaceSelector: every namespace), here as an existing pod's term that
// also lists its own namespace, next to a pod whose term lists the same
// namespace without a namespaceSelector (only that namespace). Nil and
// empty namespace selectors print alike, so the terms share a counter.
func TestUpstreamExistingAntiAffinityNamespaceSelectorNilVersusEmpty(t *testing.T) {
	nodes := []*corev1.Node{
		b.Node("n1", "4", "8Gi", b.NodeLabels(zone, "zone-a")),
		b.Node("n2", "4", "8Gi", b.NodeLabels(zone, "zone-b")),
	}
	term := func(nsSel *metav1.LabelSelector) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: zone, Namespaces: []string{"default"}, NamespaceSelector: nsSel,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"service": "securityscan"}}}
	}
	onlyDefault := b.Pod("only-default", b.NodeName("n2"), b.PodAntiAffinity(term(nil)))
	allNamespaces := b.Pod("all-namespaces", b.NodeName("n1"), b.PodAntiAffinity(term(&metav1.LabelSelector{})))
	incoming := b.Pod("p", b.Namespace("subteam1.team1"), b.Labels("service", "securityscan"))
	want := map[string]bool{"n1": false, "n2": true}
	t.Run("the pod limited to its namespace is read first", func(t *testing.T) {
		expect(t, verdicts(t, nodes, []*corev1.Pod{onlyDefault, allNamespaces}, nil, incoming), want)
	})
	t.Run("the pod of every namespace is read first", func(t *testing.T) {
		expect(t, verdicts(t, nodes, []*corev1.Pod{allNamespaces, onlyDefault}, nil, incoming), want)
	})
}

// Upstream: interpodaffinity/filtering_test.go,
// TestRequiredAffinityMultipleNodes "Test incoming pod's anti-affinity:
// incoming pod wouldn't considered as a fit as it at least violates one
// anti-affinity rule of existingPod", with the incoming pod's term
// selecting every pod ({}), classified after another pending pod whose
// term has no labelSelector (as the planner prepares every pending class
// on one snapshot). kube-scheduler places pods one at a time: the second
// pending pod plays no part.
func TestUpstreamIncomingAntiAffinityAfterAnotherPendingClass(t *testing.T) {
	nodes := []*corev1.Node{
		b.Node("nodeA", "4", "8Gi", b.NodeLabels(zone, "z1")),
		b.Node("nodeB", "4", "8Gi", b.NodeLabels(zone, "z2")),
	}
	placed := []*corev1.Pod{b.Pod("e", b.NodeName("nodeA"), b.Labels("foo", ""))}
	other := b.Pod("other", b.PodAntiAffinity(antiTerm(zone, nil)))
	incoming := b.Pod("p", b.PodAntiAffinity(antiTerm(zone, &metav1.LabelSelector{})))
	want := map[string]bool{"nodeA": false, "nodeB": true}
	t.Run("alone", func(t *testing.T) { expect(t, verdicts(t, nodes, placed, nil, incoming), want) })
	t.Run("after a pending pod whose term has no selector", func(t *testing.T) {
		expect(t, verdicts(t, nodes, placed, nil, other, incoming), want)
	})
}

// Upstream: interpodaffinity/filtering_test.go, TestRequiredAffinitySingleNode
// "verify that PodAntiAffinity from existing pod is respected when pod has
// no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry
// with the existing pod", with the existing pod's term written with
// matchLabelKeys. kube-apiserver merged the key's value into the
// labelSelector when it admitted the pod (tier In [fe]); the pod was
// relabelled since (tier=be). kube-scheduler reads the stored
// labelSelector only (it never merges matchLabelKeys of pod affinity);
// berth merges again with the current labels (tier in (fe), tier in (be):
// nothing).
func TestUpstreamExistingAntiAffinityMatchLabelKeysAfterRelabel(t *testing.T) {
	nodes := []*corev1.Node{
		b.Node("node1", "4", "8Gi", b.NodeLabels(zone, "z11")),
		b.Node("node2", "4", "8Gi", b.NodeLabels(zone, "z12")),
	}
	existing := b.Pod("e", b.NodeName("node1"), b.Labels("service", "securityscan", "tier", "be"),
		b.PodAntiAffinity(corev1.PodAffinityTerm{TopologyKey: zone, MatchLabelKeys: []string{"tier"},
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "service", Operator: metav1.LabelSelectorOpIn, Values: []string{"securityscan", "value2"}},
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"fe"}}, // merged at admission
			}}}))
	incoming := b.Pod("p", b.Labels("service", "securityscan", "tier", "fe"))
	expect(t, verdicts(t, nodes, []*corev1.Pod{existing}, nil, incoming), map[string]bool{"node1": false, "node2": true})
}
