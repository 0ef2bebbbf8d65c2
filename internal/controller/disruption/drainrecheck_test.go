package disruption_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
)

// podOf is the name of the pod labelled app on node.
func (f *fixture) podOf(app, node string) string {
	f.t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns), client.MatchingLabels{"app": app},
		client.MatchingFields{"spec.nodeName": node}); err != nil || len(pods.Items) != 1 {
		f.t.Fatalf("pod of %s on node %s: %d pods (%v)", app, node, len(pods.Items), err)
	}
	return pods.Items[0].Name
}

// heldDeployment is slowDeployment with pods of cpu.
func (f *fixture) heldDeployment(name, cpu string, grace int64) {
	f.t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Finalizers: []string{holdFinalizer}}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			NodeSelector:                  map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
			Tolerations:                   []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1alpha1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}},
	}}
	if err := env.Client.Create(context.Background(), d); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		pods := &corev1.PodList{}
		_ = env.Client.List(context.Background(), pods, client.InNamespace(f.ns))
		for i := range pods.Items {
			p := &pods.Items[i]
			patch := client.MergeFrom(p.DeepCopy())
			p.Finalizers = nil
			_ = env.Client.Patch(context.Background(), p, patch)
		}
	})
}

// TestADrainInProgressSurvivesARestart: a node drains; its pod (800m) was
// evicted and shuts down, and its ReplicaSet's replacement already runs
// on the other node (2 cpu: room for two such pods, not three). A
// controller started afresh (a new leader) checks the drain again: it
// must let it finish, as Karpenter's terminator does (its drain state is
// the node's deletion timestamp and taint, nothing in memory) and as the
// same controller does without the restart. Before, the check counted the
// pod shutting down as needing a home besides its replacement, found
// none, and stopped the drain (DrainStopped, NoHome). (Found comparing
// with Karpenter's termination suite.)
func TestADrainInProgressSurvivesARestart(t *testing.T) {
	f := setup(t, "sd-restart-mid", 2)
	f.heldDeployment("big", "800m", 60)
	f.waitRunning(2)
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v, want one node drained", res.Started)
	}
	victim := res.Started[0]
	f.clk.Step(10 * time.Second)
	f.run() // evicts the pod
	f.shuttingDownOn(victim, "big", 1)
	f.waitRunning(2) // its replacement runs on the other node
	f.clk.Step(10 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Fatalf("without a restart: given up %v; events %+v", res.GivenUp, f.events.For(victim))
	}
	// A new leader.
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: f.ctrl.Cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	f.clk.Step(10 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Errorf("after a restart the drain of %s (its pod already evicted, its replacement running) was given up: events %+v", victim, f.events.For(victim))
	}
}

// TestAPodLandingOnADrainingNodeDoesNotStopItsDrain: as above without a
// restart: while the evicted pod shuts down (its replacement running on
// the other node), a pod tolerating every taint lands on the draining
// node. It is new to the drain, so the removal is simulated again; the
// drain must go on (it fits elsewhere, and the pod shutting down needs
// no second home: its replacement has one).
func TestAPodLandingOnADrainingNodeDoesNotStopItsDrain(t *testing.T) {
	f := setup(t, "sd-landing-mid", 2)
	f.heldDeployment("big", "800m", 60)
	f.waitRunning(2)
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v, want one node drained", res.Started)
	}
	victim := res.Started[0]
	f.clk.Step(10 * time.Second)
	f.run() // evicts the pod
	f.shuttingDownOn(victim, "big", 1)
	f.waitRunning(2)
	f.preferring("agent", "100m", victim, true)
	f.waitRunning(3)
	f.podOf("agent", victim)
	f.clk.Step(10 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Errorf("a 100m pod landed on draining %s; drain given up: events %+v", victim, f.events.For(victim))
	}
}
