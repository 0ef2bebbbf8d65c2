package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestAReplacementWithAStartupTaintIsNotUp: a Ready replacement a minute
// old is up for the pods it takes only without the taints that go away
// on their own once it is: its group's startup taints, and those by
// convention (Cluster Autoscaler's, the Node Readiness Controller's,
// network-unavailable). An hour after its launch it is what it is.
func TestAReplacementWithAStartupTaintIsNotUp(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("g", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: "agent.example.com/not-ready", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	c := New(Deps{Clock: clocktesting.NewFakeClock(now)}, Options{})
	w := &world{groups: map[string]*v1alpha1.NodeGroup{"g": ng}}
	for _, tc := range []struct {
		name, taint string
		age         time.Duration
		up          bool
	}{
		{name: "no taint", age: time.Minute, up: true},
		{name: "the group's startup taint", taint: "agent.example.com/not-ready", age: time.Minute},
		{name: "a readiness rule's taint", taint: "readiness.k8s.io/network-ready", age: time.Minute},
		{name: "a Cluster Autoscaler startup taint", taint: "startup-taint.cluster-autoscaler.kubernetes.io/cni", age: time.Minute},
		{name: "network-unavailable", taint: corev1.TaintNodeNetworkUnavailable, age: time.Minute},
		{name: "a readiness rule's taint an hour after the launch", taint: "readiness.k8s.io/network-ready", age: time.Hour, up: true},
		{name: "another taint", taint: "dedicated", age: time.Minute, up: true},
	} {
		repl := b.Node("r", "2", "8Gi", b.LaunchedBy(ng))
		repl.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
		if tc.taint != "" {
			b.NodeTaint(tc.taint, "", corev1.TaintEffectNoSchedule)(repl)
		}
		if got := c.upFor(w, repl); got != tc.up {
			t.Errorf("%s: up %v, want %v", tc.name, got, tc.up)
		}
	}
}
