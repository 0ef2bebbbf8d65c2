package system_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/config/system"
)

// TestPriorityClassesMatchTheCode: the shipped manifests carry the names and
// values the controller and planner assume, and none of them preempts.
func TestPriorityClassesMatchTheCode(t *testing.T) {
	pcs, err := system.PriorityClasses()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, pc := range pcs {
		got[pc.Name] = pc.Value
		if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever {
			t.Errorf("PriorityClass %s preempts; berth's classes must not", pc.Name)
		}
	}
	want := map[string]int32{
		v1alpha1.PriorityClassHeadroom:          v1alpha1.PriorityHeadroom,
		v1alpha1.PriorityClassNodeReserve:       v1alpha1.PriorityNodeReserve,
		v1alpha1.PriorityClassBurstCritical:     v1alpha1.PriorityBurstCritical,
		v1alpha1.PriorityClassCompanionHeadroom: v1alpha1.PriorityCompanionHeadroom,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PriorityClasses (-code +manifest):\n%s", diff)
	}
}

// TestNamespaceIsBerthsAndRestricted: the shipped namespace is the one the
// controller puts its pods in, and Pod Security enforces the restricted
// profile there (and warns and audits at the same level).
func TestNamespaceIsBerthsAndRestricted(t *testing.T) {
	ns, err := system.Namespace()
	if err != nil {
		t.Fatal(err)
	}
	if ns.Name != v1alpha1.SystemNamespace {
		t.Errorf("namespace %q, want %q", ns.Name, v1alpha1.SystemNamespace)
	}
	for _, mode := range []string{"enforce", "warn", "audit"} {
		if got := ns.Labels["pod-security.kubernetes.io/"+mode]; got != "restricted" {
			t.Errorf("Pod Security %s level %q, want restricted", mode, got)
		}
	}
}
