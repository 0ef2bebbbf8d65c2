package disruption_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
)

// delayKey is a delay-deletion annotation another controller (a DNS
// record cleaner, say) puts on nodes it must clean up after.
const delayKey = v1alpha1.AnnotationPrefixDelayDeletion + "dns-cleaner"

// withDeletionDelay gives the fixture a controller that honours
// delay-deletion annotations for up to timeout (the fixture's own has
// them off, as Options' zero value does).
func (f *fixture) withDeletionDelay(timeout time.Duration) {
	f.ctrl = disruption.New(disruption.Deps{Client: f.ctrl.Client, Cloud: f.ctrl.Cloud, Recorder: f.events, Clock: f.clk},
		disruption.Options{Interval: time.Second, DeletionDelayTimeout: timeout})
}

// TestARemovalWaitsForAnotherControllersDelayDeletionAnnotation: a
// drained node annotated delay-deletion.cluster-autoscaler.kubernetes.io/
// by another controller is not removed while the annotation is there,
// across a restart, and is removed once that controller takes it off.
func TestARemovalWaitsForAnotherControllersDelayDeletionAnnotation(t *testing.T) {
	f := setup(t, "sd-delay", 2)
	f.withDeletionDelay(2 * time.Minute)
	f.deploymentOf(2, "900m")
	victim := f.startDrain()
	f.patchNode(victim, func(n *corev1.Node) { n.Annotations[delayKey] = "" })
	f.drainUntilEmptied(victim)

	f.clk.Step(time.Minute)
	if res := f.run(); slices.Contains(res.Removed, victim) || f.node(victim) == nil {
		t.Fatalf("node %s removed while %s is on it", victim, delayKey)
	}
	if msg := f.said(victim, disruption.ReasonAwaitingDeletionDelay); !strings.Contains(msg, delayKey) {
		t.Errorf("event %s on %s: %q, want it to name %s", disruption.ReasonAwaitingDeletionDelay, victim, msg, delayKey)
	}
	// A controller started meanwhile waits for what is left of the two
	// minutes, from the time written on the node.
	f.withDeletionDelay(2 * time.Minute)
	f.clk.Step(30 * time.Second)
	if f.run(); f.node(victim) == nil {
		t.Fatalf("node %s removed after a restart while %s is on it", victim, delayKey)
	}

	f.patchNode(victim, func(n *corev1.Node) { delete(n.Annotations, delayKey) })
	if res := f.run(); !slices.Contains(res.Removed, victim) {
		t.Fatalf("removed %v once the annotation was taken off, want %s", res.Removed, victim)
	}
}

// TestADelayDeletionAnnotationHoldsTheNodeOnlyForTheTimeout: an
// annotation no controller takes off holds the removal for the timeout
// from when berth found the emptied node carrying it; then the node goes
// with a warning, also after a restart. A drain that took most of its own
// timeout before is not given up meanwhile.
func TestADelayDeletionAnnotationHoldsTheNodeOnlyForTheTimeout(t *testing.T) {
	f := setup(t, "sd-delay-stuck", 2)
	f.withDeletionDelay(3 * time.Minute)
	f.deploymentOf(2, "900m")
	victim := f.startDrain()
	f.patchNode(victim, func(n *corev1.Node) { n.Annotations[delayKey] = "true" })
	f.clk.Step(4 * time.Minute) // of the drain's 5
	f.drainUntilEmptied(victim)

	f.clk.Step(2*time.Minute + 30*time.Second)
	if res := f.run(); f.node(victim) == nil || len(res.GivenUp) > 0 {
		t.Fatalf("2.5 minutes into the wait: node gone or given up (removed %v, given up %v); want %s waiting", res.Removed, res.GivenUp, victim)
	}
	// A controller started meanwhile counts from the time written on
	// the node, not from its start.
	f.withDeletionDelay(3 * time.Minute)
	f.clk.Step(time.Minute)
	res := f.run()
	if !slices.Contains(res.Removed, victim) {
		t.Fatalf("past the timeout of the wait, after a restart: removed %v, given up %v; want %s removed", res.Removed, res.GivenUp, victim)
	}
	if msg := f.said(victim, disruption.ReasonDeletionDelayTimedOut); !strings.Contains(msg, delayKey) {
		t.Errorf("no %s warning naming %s on %s: %+v", disruption.ReasonDeletionDelayTimedOut, delayKey, victim, f.events.For(victim))
	}
}

// TestWithoutADeletionDelayTimeoutTheAnnotationIsNotWaitedFor: with
// --node-deletion-delay-timeout=0 (Options' zero value) the annotation
// does not hold the node.
func TestWithoutADeletionDelayTimeoutTheAnnotationIsNotWaitedFor(t *testing.T) {
	f := setup(t, "sd-delay-off", 2)
	f.deploymentOf(2, "900m")
	victim := f.startDrain()
	f.patchNode(victim, func(n *corev1.Node) { n.Annotations[delayKey] = "" })
	if res := f.drainUntilEmptied(victim); !slices.Contains(res.Removed, victim) && f.node(victim) != nil {
		t.Fatalf("removed %v once emptied, want %s: the annotation is not waited for without a timeout", res.Removed, victim)
	}
}
