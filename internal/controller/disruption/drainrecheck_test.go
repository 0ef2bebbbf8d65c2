package disruption_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	victim, _ := f.drainWithOnePodShuttingDown("big")
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
	victim, _ := f.drainWithOnePodShuttingDown("big")
	f.waitRunning(2)
	f.preferring("agent", "100m", victim, true)
	f.waitRunning(3)
	f.podOf("agent", victim)
	f.clk.Step(10 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Errorf("a 100m pod landed on draining %s; drain given up: events %+v", victim, f.events.For(victim))
	}
}
