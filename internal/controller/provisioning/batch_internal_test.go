package provisioning

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestABatchEndsBatchIdleAfterItsLastNewPod (Karpenter's provisioning
// suite, Context("Batcher")): a batch ends BatchIdle (1 s) after the last
// pending pod that joined it. The scheduler writing a new message on a
// pod already in the batch, a node added or a node group's status
// written is no new pod: under a stream of such events every batch
// waited BatchMax (10 s). A second pod does extend it.
func TestABatchEndsBatchIdleAfterItsLastNewPod(t *testing.T) {
	unschedulable := func(name, msg string) *corev1.Pod {
		return b.Pod(name, b.CPU("1"), b.Phase(corev1.PodPending), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: msg}}
		})
	}
	for _, tc := range []struct {
		name   string
		second func(p *Provisioner)
		open   bool // 1.1 s after the first pod
	}{
		{name: "the scheduler writes the pod's message again", second: func(p *Provisioner) {
			p.triggerIfPending(unschedulable("web", "0/4 nodes are available: 1 node(s) had untolerated taint"))
		}},
		{name: "a node is added", second: func(p *Provisioner) { p.Trigger() }},
		{name: "another pod comes", second: func(p *Provisioner) {
			p.triggerIfPending(unschedulable("web-2", "0/3 nodes are available: 3 Insufficient cpu."))
		}, open: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
			p := New(Deps{Clock: clk}, Options{BatchIdle: time.Second, BatchMax: 10 * time.Second})
			p.triggerIfPending(unschedulable("web", "0/3 nodes are available: 3 Insufficient cpu."))
			<-p.trigger // Start takes the first trigger, then waits for the batch
			done := make(chan struct{})
			go func() {
				p.waitForBatch(context.Background())
				close(done)
			}()
			waitUntil(t, clk.HasWaiters)
			clk.Step(600 * time.Millisecond)
			tc.second(p)
			waitUntil(t, func() bool { return len(p.trigger) == 0 }) // the batch took it
			time.Sleep(50 * time.Millisecond)                        // and reset its timer, if it does
			clk.Step(500 * time.Millisecond)
			select {
			case <-done:
				if tc.open {
					t.Fatal("the batch ended 1.1 s after its first pod, 0.5 s after the second came")
				}
			case <-time.After(time.Second):
				if !tc.open {
					t.Fatal("the batch is still open 1.1 s after its only pod came (BatchIdle 1 s)")
				}
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(time.Millisecond)
	}
}
