package disruption_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// holdFinalizer keeps a deleted pod shutting down (terminating) until the
// test ends, as a pod using its grace period does.
const holdFinalizer = "test.berth.dev/hold"

// slowDeployment runs two pods of 500m of a Deployment named name, one a
// node, each shutting down for up to grace seconds once deleted (held by
// holdFinalizer, taken off when the test ends).
func (f *fixture) slowDeployment(name string, grace int64) *appsv1.Deployment {
	return f.heldDeployment(name, "500m", grace)
}

// heldDeployment is slowDeployment with pods of cpu.
func (f *fixture) heldDeployment(name, cpu string, grace int64) *appsv1.Deployment {
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
	return d
}

// drainWithOnePodShuttingDown starts the drain of one node and runs the
// round that evicts its pod of app, and returns the node and that pod
// once it shuts down.
func (f *fixture) drainWithOnePodShuttingDown(app string) (string, *corev1.Pod) {
	f.t.Helper()
	res := f.run()
	if len(res.Started) != 1 {
		f.t.Fatalf("started %v, want one node drained", res.Started)
	}
	victim := res.Started[0]
	f.clk.Step(10 * time.Second)
	f.run() // evicts the pod
	return victim, f.shuttingDownOn(victim, app, 1)[0]
}

// finishShutdown lets a pod held by holdFinalizer go, and waits until it
// is gone.
func (f *fixture) finishShutdown(p *corev1.Pod) {
	f.t.Helper()
	patch := client.MergeFrom(p.DeepCopy())
	p.Finalizers = nil
	if err := env.Client.Patch(context.Background(), p, patch); err != nil {
		f.t.Fatal(err)
	}
	expect.Eventually(f.t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		return apierrors.IsNotFound(err), "pod " + p.Name + " still there", client.IgnoreNotFound(err)
	})
}

// shuttingDownOn waits until n pods of app on node are being deleted,
// and returns them.
func (f *fixture) shuttingDownOn(node, app string, n int) []*corev1.Pod {
	f.t.Helper()
	var deleting []*corev1.Pod
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns), client.MatchingLabels{"app": app}, client.MatchingFields{"spec.nodeName": node}); err != nil {
			return false, "", err
		}
		deleting = nil
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp != nil {
				deleting = append(deleting, &pods.Items[i])
			}
		}
		return len(deleting) == n, fmt.Sprintf("%d of %d pods of %s on %s shutting down", len(deleting), n, app, node), nil
	})
	return deleting
}

// shuttingDownPastTheDrainTimeout runs a Deployment of two pods with a
// grace period of 10 minutes, drains one node, evicts its pod and steps
// past the drain timeout (5 minutes) while the pod shuts down, checking
// that the drain waits; it returns the node and its pod.
func (f *fixture) shuttingDownPastTheDrainTimeout() (string, *corev1.Pod) {
	f.t.Helper()
	f.slowDeployment("slow", 600)
	f.waitRunning(2)
	victim, leaving := f.drainWithOnePodShuttingDown("slow")
	f.clk.Step(6 * time.Minute) // past the drain timeout
	if res := f.run(); contains(res.GivenUp, victim) || len(res.Removed) > 0 {
		f.t.Fatalf("6 minutes into the drain, its pod shutting down: given up %v, removed %v; want the drain waiting", res.GivenUp, res.Removed)
	}
	return victim, leaving
}

// TestAnEvictedPodShuttingDownIsWaitedForPastTheDrainTimeout: a pod with
// a grace period of 10 minutes is evicted and takes it; the drain timeout
// (5 minutes) passes while it shuts down. The drain is not given up (the
// pod is leaving, the node would be untainted and refilled for nothing):
// the node waits for it, and goes once the pod is past its grace period.
func TestAnEvictedPodShuttingDownIsWaitedForPastTheDrainTimeout(t *testing.T) {
	f := setup(t, "sd-slow", 2)
	victim, _ := f.shuttingDownPastTheDrainTimeout()
	if n := f.node(victim); n == nil || !tainted(n) {
		t.Fatalf("node %s while its evicted pod shuts down: want it still draining", victim)
	}
	if hasEvent(f, victim, disruption.ReasonDrainTimedOut) {
		t.Errorf("events on %s: %+v, want no DrainTimedOut", victim, f.events.For(victim))
	}

	// The pod is past its grace period (and within the drain timeout
	// after it): it goes with the node.
	f.clk.SetTime(podutil.TerminatingUntil(f.shuttingDownOn(victim, "slow", 1)[0]).Add(time.Minute))
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		f.run()
		return f.node(victim) == nil, "node " + victim + " not removed yet", nil
	})
}

// TestANodeWhosePodsLeftAfterTheDrainTimeoutIsRemoved: as above, but the
// pod finishes within its grace period, after the drain timeout, and is
// gone. The node, empty, is removed: the drain is not given up (it was,
// "pods still to evict: []", and the pods had moved for nothing).
func TestANodeWhosePodsLeftAfterTheDrainTimeoutIsRemoved(t *testing.T) {
	f := setup(t, "sd-slow-gone", 2)
	victim, leaving := f.shuttingDownPastTheDrainTimeout()
	patch := client.MergeFrom(leaving.DeepCopy())
	leaving.Finalizers = nil
	if err := env.Client.Patch(context.Background(), leaving, patch); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(leaving), &corev1.Pod{})
		return apierrors.IsNotFound(err), "pod " + leaving.Name + " still there", client.IgnoreNotFound(err)
	})
	f.clk.Step(10 * time.Second)
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		if res := f.run(); contains(res.GivenUp, victim) {
			return false, "", fmt.Errorf("drain of the emptied node given up; events %+v", f.events.For(victim))
		}
		return f.node(victim) == nil, "node " + victim + " not removed yet", nil
	})
	if hasEvent(f, victim, disruption.ReasonDrainTimedOut) {
		t.Errorf("events on %s: %+v, want no DrainTimedOut", victim, f.events.For(victim))
	}
}

// TestAPodShuttingDownWhoseDeploymentWasDeletedDoesNotStopTheDrain: while
// a node drains, a Deployment with a pod there is deleted; its pods shut
// down, their ReplicaSet gone. The drain goes on (the pod is leaving: that
// its controller is gone only matters for a pod berth would evict), and
// the node goes once the pods have.
func TestAPodShuttingDownWhoseDeploymentWasDeletedDoesNotStopTheDrain(t *testing.T) {
	f := setup(t, "sd-gone", 2)
	d := f.slowDeployment("side", 30)
	f.waitRunning(2)
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v, want one node drained", res.Started)
	}
	victim := res.Started[0]
	if err := env.Client.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	f.shuttingDownOn(victim, "side", 1)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		rss := &appsv1.ReplicaSetList{}
		err := env.Client.List(ctx, rss, client.InNamespace(f.ns))
		return err == nil && len(rss.Items) == 0, fmt.Sprintf("%d ReplicaSets left", len(rss.Items)), err
	})
	f.clk.Step(5 * time.Second)
	if res := f.run(); contains(res.GivenUp, victim) {
		t.Fatalf("given up %v; events %+v; want the drain going on", res.GivenUp, f.events.For(victim))
	}
	if n := f.node(victim); n == nil || !tainted(n) {
		t.Fatalf("node %s: want it still draining", victim)
	}
	// The pod is past its grace period (within the drain timeout): it goes
	// with the node.
	f.clk.SetTime(podutil.TerminatingUntil(f.shuttingDownOn(victim, "side", 1)[0]).Add(time.Minute))
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		f.run()
		return f.node(victim) == nil, "node " + victim + " not removed yet", nil
	})
	if hasEvent(f, victim, disruption.ReasonDrainStopped) {
		t.Errorf("events on %s: %+v, want no DrainStopped", victim, f.events.For(victim))
	}
}
