package fidelity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUpstreamDiffFidelity runs the cases of
// internal/simulator/predicates/upstream_cases_test.go that need one
// pending pod through the real kube-scheduler plugins and berth.
func TestUpstreamDiffFidelity(t *testing.T) {
	zoned := func(z string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Labels[zoneKey] = z }
	}
	nodes := func() []*corev1.Node {
		return []*corev1.Node{mkNode("n1", "4", "8Gi", zoned("zone-a")), mkNode("n2", "4", "8Gi", zoned("zone-b")), mkNode("n3", "4", "8Gi", zoned("zone-c"))}
	}
	anti := func(term corev1.PodAffinityTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = nil
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}
	}
	nsTerm := func(nsSel *metav1.LabelSelector) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: zoneKey, Namespaces: []string{"default"}, NamespaceSelector: nsSel,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"service": "securityscan"}}}
	}
	incoming := func(ns string) *corev1.Pod {
		return mkPod("in", "", nil, func(p *corev1.Pod) { p.Namespace = ns; p.Labels = map[string]string{"service": "securityscan"} })
	}
	quiet := mkPod("quiet", "n2", nil, anti(corev1.PodAffinityTerm{TopologyKey: zoneKey}))
	loner := mkPod("loner", "n1", nil, anti(corev1.PodAffinityTerm{TopologyKey: zoneKey, LabelSelector: &metav1.LabelSelector{}}))
	onlyDefault := mkPod("only-default", "n2", nil, anti(nsTerm(nil)))
	allNamespaces := mkPod("all-namespaces", "n1", nil, anti(nsTerm(&metav1.LabelSelector{})))
	runTable(t, []tcase{
		{"existing anti-affinity: nil selector read before {}", Case{Nodes: nodes(), Pods: []*corev1.Pod{quiet, loner}, Pod: incoming("default")}},
		{"existing anti-affinity: {} selector read before nil", Case{Nodes: nodes(), Pods: []*corev1.Pod{loner, quiet}, Pod: incoming("default")}},
		{"existing anti-affinity: nil namespaceSelector read before {}", Case{Nodes: nodes(), Pods: []*corev1.Pod{onlyDefault, allNamespaces}, Pod: incoming("prod")}},
		{"existing anti-affinity: {} namespaceSelector read before nil", Case{Nodes: nodes(), Pods: []*corev1.Pod{allNamespaces, onlyDefault}, Pod: incoming("prod")}},
	})
}

// TestUpstreamDiffMatchLabelKeysFidelity: an existing pod relabelled after
// kube-apiserver merged its matchLabelKeys into its anti-affinity selector.
func TestUpstreamDiffMatchLabelKeysFidelity(t *testing.T) {
	zoned := func(z string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Labels[zoneKey] = z }
	}
	existing := mkPod("e", "node1", nil, func(p *corev1.Pod) {
		p.Labels = map[string]string{"service": "securityscan", "tier": "be"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: zoneKey, MatchLabelKeys: []string{"tier"},
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "service", Operator: metav1.LabelSelectorOpIn, Values: []string{"securityscan", "value2"}},
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"fe"}},
			}}}}}}
	})
	incoming := mkPod("in", "", nil, func(p *corev1.Pod) { p.Labels = map[string]string{"service": "securityscan", "tier": "fe"} })
	runTable(t, []tcase{{"existing anti-affinity, matchLabelKeys merged before a relabel", Case{
		Nodes: []*corev1.Node{mkNode("node1", "4", "8Gi", zoned("z11")), mkNode("node2", "4", "8Gi", zoned("z12"))},
		Pods:  []*corev1.Pod{existing}, Pod: incoming}}})
}
