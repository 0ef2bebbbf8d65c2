package predicates_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

const (
	zone     = v1alpha1.LabelZone
	hostname = v1alpha1.LabelHostname
)

// threeNodes: n1 and n2 in zone-a, n3 in zone-b.
func threeNodes(opts ...b.NodeOption) []*corev1.Node {
	return []*corev1.Node{
		b.Node("n1", "4", "8Gi", append([]b.NodeOption{b.NodeLabels(zone, "zone-a")}, opts...)...),
		b.Node("n2", "4", "8Gi", append([]b.NodeOption{b.NodeLabels(zone, "zone-a")}, opts...)...),
		b.Node("n3", "4", "8Gi", append([]b.NodeOption{b.NodeLabels(zone, "zone-b")}, opts...)...),
	}
}

func TestInterPodAffinity(t *testing.T) {
	web := func(name, node string, opts ...b.PodOption) *corev1.Pod {
		return b.Pod(name, append([]b.PodOption{b.Labels("app", "web"), b.NodeName(node)}, opts...)...)
	}
	exprTerm := func(key string, op metav1.LabelSelectorOperator, values ...string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: zone, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}}
	}
	prod := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}}
	run(t, []scenario{
		{name: "affinity passes in the zone of a matching pod", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.PodAffinity(b.AffinityTerm(zone, "app", "web"))), want: ok},
		{name: "affinity fails in a zone without a matching pod", nodes: threeNodes(), node: "n3",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.PodAffinity(b.AffinityTerm(zone, "app", "web"))), want: waiting, wantReason: predicates.ReasonAffinity},
		{name: "affinity with no matching pod anywhere fails for a pod that does not match itself", nodes: threeNodes(), node: "n1",
			pod: b.Pod("p", b.PodAffinity(b.AffinityTerm(zone, "app", "web"))), want: waiting},
		{name: "the first pod of a self-affine group goes anywhere", nodes: threeNodes(), node: "n3",
			pod: b.Pod("p", b.Labels("app", "web"), b.PodAffinity(b.AffinityTerm(zone, "app", "web"))), want: ok},
		{name: "affinity fails for good on a node without the topology key", nodes: []*corev1.Node{b.Node("n1", "4", "8Gi")}, node: "n1",
			pod: b.Pod("p", b.Labels("app", "web"), b.PodAffinity(b.AffinityTerm(zone, "app", "web"))), want: unresolvable, wantReason: predicates.ReasonAffinity},
		{name: "affinity only sees pods in the term's namespaces", nodes: threeNodes(), node: "n1",
			placed: []*corev1.Pod{web("w1", "n1", b.Namespace("other"))},
			pod:    b.Pod("p", b.PodAffinity(b.AffinityTerm(zone, "app", "web"))), want: waiting},
		{name: "a namespaceSelector widens the term to matching namespaces", nodes: threeNodes(), node: "n1",
			namespaces: []*corev1.Namespace{prod},
			placed:     []*corev1.Pod{web("w1", "n1", b.Namespace("prod"))},
			pod: b.Pod("p", b.PodAffinity(corev1.PodAffinityTerm{TopologyKey: zone,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}})), want: ok},
		{name: "the first pod of a self-affine group with an empty namespaceSelector (all namespaces) goes anywhere, its namespace unknown",
			nodes: threeNodes(), node: "n3",
			pod: b.Pod("p", b.Namespace("unlisted"), b.Labels("app", "web"), b.PodAffinity(corev1.PodAffinityTerm{TopologyKey: zone,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				NamespaceSelector: &metav1.LabelSelector{}})), want: ok},
		{name: "an empty namespaceSelector sees matching pods in namespaces the snapshot has no labels for", nodes: threeNodes(), node: "n1",
			placed: []*corev1.Pod{web("w1", "n1", b.Namespace("elsewhere"))},
			pod: b.Pod("p", b.PodAffinity(corev1.PodAffinityTerm{TopologyKey: zone,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				NamespaceSelector: &metav1.LabelSelector{}})), want: ok},
		{name: "matchExpressions NotIn selects pods without the value", nodes: threeNodes(), node: "n1",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.PodAffinity(exprTerm("app", metav1.LabelSelectorOpNotIn, "db"))), want: ok},
		{name: "matchExpressions DoesNotExist does not select pods with the label", nodes: threeNodes(), node: "n1",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.Labels("app", "api"), b.PodAffinity(exprTerm("app", metav1.LabelSelectorOpDoesNotExist))), want: waiting},

		{name: "anti-affinity fails in the zone of a matching pod", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.PodAntiAffinity(b.AffinityTerm(zone, "app", "web"))), want: unresolvable, wantReason: predicates.ReasonAntiAffinity},
		{name: "anti-affinity passes in another zone", nodes: threeNodes(), node: "n3",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.PodAntiAffinity(b.AffinityTerm(zone, "app", "web"))), want: ok},
		{name: "hostname anti-affinity only blocks the pod's own node", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{web("w1", "n1")},
			pod:    b.Pod("p", b.PodAntiAffinity(b.AffinityTerm(hostname, "app", "web"))), want: ok},
		{name: "an existing pod's anti-affinity keeps a matching new pod out of its zone", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{b.Pod("db", b.NodeName("n1"), b.PodAntiAffinity(b.AffinityTerm(zone, "app", "web")))},
			pod:    b.Pod("p", b.Labels("app", "web")), want: unresolvable, wantReason: predicates.ReasonExistingAntiAffinity},
		{name: "an existing pod's anti-affinity lets a matching new pod into another zone", nodes: threeNodes(), node: "n3",
			placed: []*corev1.Pod{b.Pod("db", b.NodeName("n1"), b.PodAntiAffinity(b.AffinityTerm(zone, "app", "web")))},
			pod:    b.Pod("p", b.Labels("app", "web")), want: ok},
		{name: "an existing pod's anti-affinity does not affect pods it does not select", nodes: threeNodes(), node: "n1",
			placed: []*corev1.Pod{b.Pod("db", b.NodeName("n1"), b.PodAntiAffinity(b.AffinityTerm(zone, "app", "web")))},
			pod:    b.Pod("p", b.Labels("app", "api")), want: ok},
	})
}

func TestTopologySpread(t *testing.T) {
	spreadPod := func(name, node string, opts ...b.PodOption) *corev1.Pod {
		return b.Pod(name, append([]b.PodOption{b.Labels("app", "web"), b.NodeName(node)}, opts...)...)
	}
	minDomains := func(n int32) b.PodOption {
		return b.SpreadConstraint(corev1.TopologySpreadConstraint{TopologyKey: zone, MaxSkew: 1, MinDomains: &n,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	}
	honorTaints := corev1.NodeInclusionPolicyHonor
	run(t, []scenario{
		{name: "the zone with fewer pods passes", nodes: threeNodes(), node: "n3",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "web"), b.Spread(zone, 1, "app", "web")), want: ok},
		{name: "the zone with more pods fails when skew would exceed maxSkew", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "web"), b.Spread(zone, 1, "app", "web")), want: waiting, wantReason: predicates.ReasonSpread},
		{name: "maxSkew 2 allows one more", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "web"), b.Spread(zone, 2, "app", "web")), want: ok},
		{name: "a pod not matching its own selector does not add to the skew", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "api"), b.Spread(zone, 1, "app", "web")), want: ok},
		{name: "a node without the topology key fails", nodes: []*corev1.Node{b.Node("n1", "4", "8Gi")}, node: "n1",
			pod: b.Pod("p", b.Labels("app", "web"), b.Spread(zone, 1, "app", "web")), want: unresolvable, wantReason: predicates.ReasonSpreadMissingLabel},
		{name: "minDomains above the number of domains makes the minimum zero", nodes: threeNodes(), node: "n3",
			// zone-a 1, zone-b 1: min 1 would allow zone-b, but 2 domains < minDomains 3 make min 0.
			placed: []*corev1.Pod{spreadPod("a", "n1"), spreadPod("b", "n3")},
			pod:    b.Pod("p", b.Labels("app", "web"), minDomains(3)), want: waiting},
		{name: "minDomains met uses the real minimum", nodes: threeNodes(), node: "n3",
			placed: []*corev1.Pod{spreadPod("a", "n1"), spreadPod("b", "n3")},
			pod:    b.Pod("p", b.Labels("app", "web"), minDomains(2)), want: ok},
		{name: "nodes excluded by the pod's node affinity are not domains (Honor)", nodes: []*corev1.Node{
			b.Node("n1", "4", "8Gi", b.NodeLabels(zone, "zone-a", "pool", "x")),
			b.Node("n3", "4", "8Gi", b.NodeLabels(zone, "zone-b", "pool", "y")),
		}, node: "n1",
			// zone-b is not a domain for a pod selecting pool=x, so zone-a's 1 pod is the minimum.
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "web"), b.NodeSelector("pool", "x"), b.Spread(zone, 1, "app", "web")), want: ok},
		{name: "tainted nodes are domains by default (nodeTaintsPolicy Ignore)", nodes: []*corev1.Node{
			b.Node("n1", "4", "8Gi", b.NodeLabels(zone, "zone-a")),
			b.Node("n3", "4", "8Gi", b.NodeLabels(zone, "zone-b"), b.NodeTaint("t", "", corev1.TaintEffectNoSchedule)),
		}, node: "n1",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "web"), b.Spread(zone, 1, "app", "web")), want: waiting},
		{name: "tainted nodes are not domains with nodeTaintsPolicy Honor", nodes: []*corev1.Node{
			b.Node("n1", "4", "8Gi", b.NodeLabels(zone, "zone-a")),
			b.Node("n3", "4", "8Gi", b.NodeLabels(zone, "zone-b"), b.NodeTaint("t", "", corev1.TaintEffectNoSchedule)),
		}, node: "n1",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod: b.Pod("p", b.Labels("app", "web"), b.SpreadConstraint(corev1.TopologySpreadConstraint{TopologyKey: zone, MaxSkew: 1,
				WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: &honorTaints,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})), want: ok},
		{name: "pods of other namespaces are not counted", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{spreadPod("a", "n1", b.Namespace("other"))},
			pod:    b.Pod("p", b.Labels("app", "web"), b.Spread(zone, 1, "app", "web")), want: ok},
		{name: "ScheduleAnyway constraints do not filter", nodes: threeNodes(), node: "n2",
			placed: []*corev1.Pod{spreadPod("a", "n1"), spreadPod("b", "n1")},
			pod: b.Pod("p", b.Labels("app", "web"), b.SpreadConstraint(corev1.TopologySpreadConstraint{TopologyKey: zone, MaxSkew: 1,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})), want: ok},
		{name: "hostname spread counts per node", nodes: threeNodes(), node: "n1",
			placed: []*corev1.Pod{spreadPod("a", "n1")},
			pod:    b.Pod("p", b.Labels("app", "web"), b.Spread(hostname, 1, "app", "web")), want: waiting},
	})
}
