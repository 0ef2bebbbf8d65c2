package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// prefer adds a preferred node affinity term on key=value.
func prefer(weight int32, key, value string) b.PodOption {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.NodeAffinity == nil {
			p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := p.Spec.Affinity.NodeAffinity
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
			Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}})
	}
}

// softSpread adds a ScheduleAnyway spread constraint over app=web.
func softSpread(key string) b.PodOption {
	return b.SpreadConstraint(corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
}

// TestPreferencesDecideWherePriceDoesNot: among equally priced zones,
// instance types and node groups, the planner takes the one the pod
// prefers (preferred node affinity, ScheduleAnyway spread, a
// PreferNoSchedule taint it would rather avoid); a cheaper option, and a
// group of higher weight, still win over a preference. Where nothing is
// preferred, the zones of one group take turns, and of two groups the
// first by name takes the pods.
func TestPreferencesDecideWherePriceDoesNot(t *testing.T) {
	twoZones := b.NodeGroup("general", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20"), b.OnDemand("zone-b", "0.20")))
	sameArchPrice := b.NodeGroup("general", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.InstanceType("a-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")), arch("arm64"))
	cheaperAMD := b.NodeGroup("general", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.16")),
		b.InstanceType("a-4", "4", "16Gi", b.OnDemand("zone-a", "0.18")), arch("arm64"))
	tainted := b.NodeGroup("a-batch", b.TemplateTaint("batch", "true", corev1.TaintEffectPreferNoSchedule),
		b.InstanceType("b-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	plain := b.NodeGroup("b-general", b.InstanceType("g-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	heavy := b.NodeGroup("c-preferred", b.InstanceType("h-4", "4", "16Gi", b.OnDemand("zone-b", "0.20")))
	heavy.Spec.Weight = 10
	threeZones := b.NodeGroup("general", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20"), b.OnDemand("zone-b", "0.20"),
		b.OnDemand("zone-c", "0.20")))
	otherPlain := b.NodeGroup("c-general", b.InstanceType("g-4", "4", "16Gi", b.OnDemand("zone-b", "0.20")))
	runPlanCases(t, []planCase{
		{name: "replicas that need a node each and prefer nothing take turns among the group's equally cheap zones",
			groups: []*v1alpha1.NodeGroup{threeZones}, pending: replicas("web", 4, b.CPU("3")),
			want: []string{"new zone-a/on-demand/m-4: web-1", "new zone-a/on-demand/m-4: web-4", "new zone-b/on-demand/m-4: web-2",
				"new zone-c/on-demand/m-4: web-3"}},
		{name: "a preferred zone still takes every replica",
			groups: []*v1alpha1.NodeGroup{threeZones}, pending: replicas("web", 3, b.CPU("3"), prefer(50, zone, "zone-c")),
			want: []string{"new zone-c/on-demand/m-4: web-1", "new zone-c/on-demand/m-4: web-2", "new zone-c/on-demand/m-4: web-3"}},
		{name: "of two equally cheap groups the first by name takes every replica, whatever the order they come in",
			groups: []*v1alpha1.NodeGroup{otherPlain, plain}, pending: replicas("web", 2, b.CPU("3")),
			want: []string{"new zone-a/on-demand/g-4: web-1", "new zone-a/on-demand/g-4: web-2"}},
		{name: "a pod that prefers zone-b gets a node there when both zones cost the same",
			groups: []*v1alpha1.NodeGroup{twoZones}, pending: replicas("web", 1, web(prefer(50, zone, "zone-b"))...),
			want: []string{"new zone-b/on-demand/m-4: web-1"}},
		{name: "a pod that prefers arm64 gets the arm64 type of the same price",
			groups: []*v1alpha1.NodeGroup{sameArchPrice}, pending: replicas("web", 1, web(prefer(50, v1alpha1.LabelArch, "arm64"))...),
			want: []string{"new zone-a/on-demand/a-4: web-1"}},
		{name: "a cheaper type wins over the preferred one",
			groups: []*v1alpha1.NodeGroup{cheaperAMD}, pending: replicas("web", 1, web(prefer(100, v1alpha1.LabelArch, "arm64"))...),
			want: []string{"new zone-a/on-demand/m-4: web-1"}},
		{name: "replicas with a ScheduleAnyway zone spread that need a node each go one per zone",
			groups:  []*v1alpha1.NodeGroup{twoZones},
			pending: replicas("web", 2, b.CPU("3"), b.Labels("app", "web"), softSpread(zone)),
			want:    []string{"new zone-a/on-demand/m-4: web-1", "new zone-b/on-demand/m-4: web-2"}},
		{name: "a group with a PreferNoSchedule taint is avoided at the same price",
			groups: []*v1alpha1.NodeGroup{tainted, plain}, pending: replicas("web", 1, web()...),
			want: []string{"new zone-a/on-demand/g-4: web-1"}},
		{name: "a group of higher weight wins over a preferred zone",
			groups: []*v1alpha1.NodeGroup{twoZones, heavy}, pending: replicas("web", 1, web(prefer(100, zone, "zone-a"))...),
			want: []string{"new zone-b/on-demand/h-4: web-1"}},
	})
}
