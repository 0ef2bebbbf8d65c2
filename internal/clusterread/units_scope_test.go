package clusterread_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
)

// TestAHeadroomWhoseNamedGroupIsGoneKeepsItsUnitsInTheOthers: a Headroom
// scoped to groups a and c keeps 3 units (its last valid spec, in its
// status); c is deleted, and its spec no longer resolves (its controller
// says so and that the units are kept). The round still plans its 3 units,
// in a: before, it planned none, and scale-down no longer kept the room in
// a either.
func TestAHeadroomWhoseNamedGroupIsGoneKeepsItsUnitsInTheOthers(t *testing.T) {
	ctx := context.Background()
	h := &v1alpha1.Headroom{}
	h.Name = "gone-group"
	h.Spec.Scope.NodeGroups = []string{"a", "c"}
	h.Spec.Units = &v1alpha1.HeadroomUnits{Count: 3, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	if err := env.Client.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, h) })
	h.Status.DesiredUnits, h.Status.Unit = 3, &v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	if err := env.Client.Status().Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	a := &v1alpha1.NodeGroup{}
	a.Name = "a"
	sets, err := clusterread.Units(ctx, env.Client, []*v1alpha1.NodeGroup{a})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || sets[0].Count != 3 {
		t.Fatalf("sets %+v, want the Headroom's 3 units", sets)
	}
	pod := sets[0].Pods(1)[0]
	if terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 ||
		!slices.Equal(terms[0].MatchExpressions[0].Values, []string{"a"}) {
		t.Errorf("unit's node affinity %+v, want group a only", terms)
	}
}
