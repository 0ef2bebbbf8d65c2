package snapshot_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestSpreadCountsDoNotDependOnNodeShapes: spread counters register the
// nodes of one shape at a time (the hostname's from a map of every
// node's), and cache eligibility per shape. The same random cluster is
// built twice, once with a label of its own on every node (so that no
// two nodes share a shape) and probes that also select nodes by name
// (hostname Exists: every node, each looked at alone): spread pods (zone and hostname keys, node affinity
// and taints honoured or not, one selecting nodes by name) get the same
// filter verdict on every node of both, and counters see the same number
// of domains, before and after nodes are cordoned, planned nodes added
// and pods moved.
func TestSpreadCountsDoNotDependOnNodeShapes(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			in := shapedCluster(rand.New(rand.NewSource(seed)))
			alone := shapedCluster(rand.New(rand.NewSource(seed)))
			for i, ni := range alone.Nodes {
				ni.Node.Labels["only"] = fmt.Sprint(i)
			}
			shared, single := build(t, in), build(t, alone)
			r := rand.New(rand.NewSource(seed))
			for step := range 3 {
				if diff := cmp.Diff(spreadVerdicts(t, single, step, true), spreadVerdicts(t, shared, step, false)); diff != "" {
					t.Fatalf("step %d: spread verdicts differ (-every node its own shape +nodes sharing shapes):\n%s", step, diff)
				}
				i := r.Intn(len(shared.Nodes))
				shared.Cordon(shared.Nodes[i])
				single.Cordon(single.Nodes[i])
				for _, s := range []*snapshot.Snapshot{shared, single} { // a planned node (no shape)
					n := b.Node(fmt.Sprintf("planned-%d", step), "4", "16Gi", b.NodeLabels(v1alpha1.LabelZone, "d"))
					s.AddNode(&snapshot.Node{Node: n, Planned: true, Allocatable: snapshot.FromList(n.Status.Allocatable), AllowedPods: 110})
				}
				if n := shared.Nodes[r.Intn(len(shared.Nodes))]; len(n.Pods) > 0 {
					p := n.Pods[0]
					shared.RemovePod(p)
					single.RemovePod(single.Node(n.Name).Pods[podIndex(single.Node(n.Name), p.Name)])
				}
			}
		})
	}
}

func podIndex(n *snapshot.Node, name string) int {
	for i, p := range n.Pods {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// shapedCluster is 40 nodes of a few shapes (zone, tainted or not, with
// or without the zone label) with web pods on them.
func shapedCluster(r *rand.Rand) snapshot.Input {
	var in snapshot.Input
	for i := range 40 {
		n := b.Node(fmt.Sprintf("n%02d", i), "4", "16Gi")
		if r.Intn(8) > 0 {
			n.Labels[v1alpha1.LabelZone] = []string{"a", "b", "c"}[r.Intn(3)]
		}
		if r.Intn(5) == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
		}
		n.UID = types.UID(n.Name)
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
		for j := range r.Intn(4) {
			in.Pods = append(in.Pods, b.Pod(fmt.Sprintf("web-%d-%d", i, j), b.Labels("app", "web"), b.CPU("100m"), b.NodeName(n.Name)))
		}
	}
	return in
}

// spreadVerdicts are the filter verdicts of spread pods on every node,
// and the domains their counters see. The probes of each step have
// counters of their own (registered with the nodes of the step).
func spreadVerdicts(t *testing.T, s *snapshot.Snapshot, step int, reference bool) []string {
	t.Helper()
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	inAB := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: v1alpha1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}}}
	byName := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n03", "n07"}}}}}}}}
	var probes []*corev1.Pod
	for i, key := range []string{v1alpha1.LabelZone, corev1.LabelHostname} {
		for j, aff := range []*corev1.Affinity{nil, inAB, byName} {
			for k, policy := range [][2]*corev1.NodeInclusionPolicy{{&honor, &honor}, {&ignore, &honor}, {&honor, &ignore}} {
				p := b.Pod(fmt.Sprintf("probe-%d-%d-%d", i, j, k), b.Labels("app", "web"), b.CPU("100m"), b.SpreadConstraint(corev1.TopologySpreadConstraint{
					MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: policy[0], NodeAffinityPolicy: policy[1],
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
						// a selector of each step's own: its counters are new
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "step", Operator: metav1.LabelSelectorOpNotIn, Values: []string{fmt.Sprint(100 + step)}}}}}))
				p.Spec.Affinity = aff
				if reference {
					// Selecting nodes by name (every node has one) makes
					// the counters look at every node alone.
					p.Spec.Affinity = namingNodes(aff)
				}
				probes = append(probes, p)
			}
		}
	}
	var out []string
	for _, p := range probes {
		c, err := s.Classify(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Prepare(c)
		out = append(out, fmt.Sprintf("%s domains=%d", p.Name, c.SpreadCounter(0).Domains()))
		if p.Name == "probe-0-0-1" { // zones, every node eligible: every zone a node has is a domain
			zones := map[string]bool{}
			for _, n := range s.Nodes {
				if z, ok := n.Labels()[v1alpha1.LabelZone]; ok {
					zones[z] = true
				}
			}
			if got := c.SpreadCounter(0).Domains(); got != len(zones) {
				t.Errorf("step %d: %s counts %d zone domains, the nodes have %d zones", step, p.Name, got, len(zones))
			}
		}
		for _, n := range s.Nodes {
			st := predicates.Run(predicates.Default(), s, c, n)
			out = append(out, fmt.Sprintf("  %s on %s: %d %s", p.Name, n.Name, st.Code, st.Reason))
		}
	}
	return out
}

// namingNodes adds "has a hostname" to the node selection of aff.
func namingNodes(aff *corev1.Affinity) *corev1.Affinity {
	exists := corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpExists}
	if aff == nil {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{exists}}}}}}
	}
	out := aff.DeepCopy()
	terms := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, exists)
	}
	return out
}

// TestATaintedNodeCountsAsOneBuiltWithTheTaint: a drain's taint given to
// a node of a built snapshot (Cordon, then Taint) makes every spread's
// verdicts and domains what they are in a snapshot built with the node
// cordoned and tainted: for the spreads registered before the taint,
// for those registered after, and whatever other nodes share its shape;
// reverted, they are the untainted snapshot's again, for those
// registered before, while and after.
func TestATaintedNodeCountsAsOneBuiltWithTheTaint(t *testing.T) {
	taint := corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule}
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			i := r.Intn(40)
			in := shapedCluster(rand.New(rand.NewSource(seed)))
			tainted := shapedCluster(rand.New(rand.NewSource(seed)))
			tainted.Nodes[i].Node.Spec.Unschedulable = true
			tainted.Nodes[i].Node.Spec.Taints = append(tainted.Nodes[i].Node.Spec.Taints, taint)
			s, plain, ref := build(t, in), build(t, in), build(t, tainted)
			before := spreadVerdicts(t, s, 0, false) // registered before the taint
			if diff := cmp.Diff(spreadVerdicts(t, plain, 0, false), before); diff != "" {
				t.Fatalf("two builds differ:\n%s", diff)
			}
			s.Fork()
			n := s.Nodes[i]
			s.Cordon(n)
			s.Taint(n, taint)
			for step := range 2 { // registered before, then while
				if diff := cmp.Diff(spreadVerdicts(t, ref, step, false), spreadVerdicts(t, s, step, false)); diff != "" {
					t.Fatalf("step %d, %s tainted: (-built tainted +tainted after):\n%s", step, n.Name, diff)
				}
			}
			s.Revert()
			for step := range 3 { // registered before, while, after
				if diff := cmp.Diff(spreadVerdicts(t, plain, step, false), spreadVerdicts(t, s, step, false)); diff != "" {
					t.Fatalf("step %d, reverted: (-never tainted +reverted):\n%s", step, diff)
				}
			}
		})
	}
}
