package disruption_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
)

// criticalDeployment runs two pods of 100m of a Deployment named name
// with priorityClassName system-cluster-critical (a metrics server, a
// DNS replica), one a node.
func (f *fixture) criticalDeployment(name string) {
	f.t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			PriorityClassName: "system-cluster-critical",
			NodeSelector:      map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
			Tolerations:       []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1alpha1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		}},
	}}
	if err := env.Client.Create(context.Background(), d); err != nil {
		f.t.Fatal(err)
	}
}

// TestCriticalPodsAreEvictedAfterTheOthers: a node to remove runs an
// ordinary pod (whose shutdown is held) and a system-cluster-critical
// one. Karpenter ("should evict non-critical pods first",
// terminator.go groupPodsByPriority) evicts the critical pod only once
// the non-critical ones are gone, following kubelet's graceful node
// shutdown order: the ordinary pod may still need the critical one
// (DNS, metrics, an admission webhook) while it shuts down. Once the
// ordinary pod is gone, the critical one is evicted. (Found comparing
// with Karpenter's termination suite.)
func TestCriticalPodsAreEvictedAfterTheOthers(t *testing.T) {
	f := setup(t, "sd-critical", 2)
	f.slowDeployment("slow", 60)
	f.criticalDeployment("crit")
	f.waitRunning(4)
	evicted := f.recordEvictions()
	victim, leaving := f.drainWithOnePodShuttingDown("slow") // evicted, still shutting down
	slow, crit := leaving.Name, f.podOf("crit", victim)
	if got := evicted(); !slices.Contains(got, slow) || slices.Contains(got, crit) {
		t.Errorf("while %s (not critical) shuts down, evictions asked %v: want %s evicted and the critical %s not yet", slow, got, slow, crit)
	}
	f.finishShutdown(leaving) // the ordinary pod is gone: the critical one goes next
	f.clk.Step(10 * time.Second)
	f.run()
	if got := evicted(); !slices.Contains(got, crit) {
		t.Errorf("once %s was gone, evictions asked %v: want the critical %s evicted", slow, got, crit)
	}
}

// TestCriticalPodsWaitingTheirTurnDoNotTimeTheDrainOut: as above, with an
// ordinary pod whose grace period (10 minutes) outlasts the drain timeout
// (5 minutes). The drain waits for it, the critical pod waiting its turn
// is no pod the drain failed to evict; once the ordinary pod is gone,
// past the timeout, the critical pod is evicted (its turn has the drain's
// time from then) and the drain is not given up. (Found by a review: the
// held critical pod counted as still to evict and timed the drain out.)
func TestCriticalPodsWaitingTheirTurnDoNotTimeTheDrainOut(t *testing.T) {
	f := setup(t, "sd-critical-late", 2)
	f.slowDeployment("slow", 600)
	f.criticalDeployment("crit")
	f.waitRunning(4)
	evicted := f.recordEvictions()
	victim, leaving := f.drainWithOnePodShuttingDown("slow")
	crit := f.podOf("crit", victim)
	f.clk.Step(6 * time.Minute) // past the drain timeout, the ordinary pod within its grace period
	if res := f.run(); contains(res.GivenUp, victim) || hasEvent(f, victim, disruption.ReasonDrainTimedOut) {
		t.Fatalf("6 minutes into the drain, its ordinary pod shutting down: given up %v, events %+v; want the drain waiting", res.GivenUp, f.events.For(victim))
	}
	if slices.Contains(evicted(), crit) {
		t.Errorf("critical pod %s evicted while the ordinary pod shuts down", crit)
	}
	f.finishShutdown(leaving)
	f.clk.Step(10 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) || hasEvent(f, victim, disruption.ReasonDrainTimedOut) {
		t.Fatalf("the ordinary pod gone, 6 minutes into the drain: given up %v, events %+v; want the critical pod evicted", res.GivenUp, f.events.For(victim))
	}
	if !slices.Contains(evicted(), crit) {
		t.Errorf("evictions asked %v: want the critical %s evicted once the ordinary pod is gone", evicted(), crit)
	}
}

// TestCriticalPodsTurnComesPastAPodStuckTerminating: as
// TestCriticalPodsWaitingTheirTurnDoNotTimeTheDrainOut, with one more
// ordinary pod stuck terminating (a finalizer that never clears, long
// terminating: it goes with the node). Once the slow pod is gone, past
// the timeout, the critical pod's turn begins: it must be evicted, the
// drain not given up. (Found by a review: the stuck pod, which the drain
// lets go with the node, kept the critical pods' turn from starting, and
// the drain timed out.)
func TestCriticalPodsTurnComesPastAPodStuckTerminating(t *testing.T) {
	f := setup(t, "sd-review5-stuck", 2)
	f.heldDeployment("stuck", "200m", 10)
	f.heldDeployment("slow", "200m", 600)
	f.criticalDeployment("crit")
	f.waitRunning(6)
	evicted := f.recordEvictions()
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v", res.Started)
	}
	victim := res.Started[0]
	f.clk.Step(10 * time.Second)
	f.run()
	st := f.shuttingDownOn(victim, "stuck", 1)[0]
	leaving := f.shuttingDownOn(victim, "slow", 1)[0]
	crit := f.podOf("crit", victim)
	f.clk.Step(6 * time.Minute)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Fatalf("6 minutes into the drain, its pods shutting down: given up %v, events %+v", res.GivenUp, f.events.For(victim))
	}
	if slices.Contains(evicted(), crit) {
		t.Fatalf("critical pod %s evicted while %s shuts down (and %s is stuck): %v", crit, leaving.Name, st.Name, evicted())
	}
	f.finishShutdown(leaving)
	f.clk.Step(time.Minute) // 7 minutes into the drain; the critical pod's turn begins now
	if res := f.run(); contains(res.GivenUp, victim) || hasEvent(f, victim, disruption.ReasonDrainTimedOut) {
		t.Fatalf("the ordinary pods gone (one stuck terminating), 7 minutes into the drain: given up %v, events %+v; want the critical pod %s evicted", res.GivenUp, f.events.For(victim), crit)
	}
	if !slices.Contains(evicted(), crit) {
		t.Errorf("evictions asked %v: want the critical %s evicted", evicted(), crit)
	}
}

// TestAnEarlierDrainsClockIsNotReadByTheNext: an earlier drain
// of the node reached its critical pods' turn (berth.dev/drain-critical-turn
// written) and was stopped by hand (kubectl taint nodes N
// berth.dev/disrupted-: the taint goes, the annotations stay; so also an
// older berth's cleanup or StopDrain). A later drain of the same node is
// TestCriticalPodsWaitingTheirTurnDoNotTimeTheDrainOut: its critical pods'
// turn must have the drain's time from when they are alone, not from the
// earlier drain's time. (Found by a review.)
func TestAnEarlierDrainsClockIsNotReadByTheNext(t *testing.T) {
	f := setup(t, "sd-rv6-stale", 2)
	old := f.clk.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	for _, name := range f.nodes {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationDrainCriticalTurn, old)
		if err := env.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	f.slowDeployment("slow", 600)
	f.criticalDeployment("crit")
	f.waitRunning(4)
	evicted := f.recordEvictions()
	victim, leaving := f.drainWithOnePodShuttingDown("slow")
	crit := f.podOf("crit", victim)
	f.clk.Step(6 * time.Minute)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Fatalf("given up while the ordinary pod shuts down: %+v", f.events.For(victim))
	}
	f.finishShutdown(leaving)
	f.clk.Step(10 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) || hasEvent(f, victim, disruption.ReasonDrainTimedOut) {
		t.Fatalf("the ordinary pod gone, the critical pod's turn just begun: given up %v (the node carried %s=%s from an earlier drain), events %+v",
			res.GivenUp, v1alpha1.AnnotationDrainCriticalTurn, old, f.events.For(victim))
	}
	if !slices.Contains(evicted(), crit) {
		t.Errorf("evictions asked %v: want the critical %s evicted", evicted(), crit)
	}
}
