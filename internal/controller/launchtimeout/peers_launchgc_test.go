package launchtimeout_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
)

// TestOneDeadNodeIsNoPartition: a group's only node that was Ready once
// is NotReady now (its machine died; repair is off by default). A node
// launched after it never became Ready. Cluster Autoscaler calls a
// cluster unhealthy only past OkTotalUnreadyCount (3) unready nodes AND
// 45 %; Karpenter's registration TTL has no partition guard at all. One
// dead node is not a partition: the hung launch must go, or it is paid
// for (and its pods wait) for as long as the dead node stays.
func TestOneDeadNodeIsNoPartition(t *testing.T) {
	ng := createGroup(t, "one-dead", time.Hour)
	dead := launch(t, ng).NodeName
	patchLabel(t, dead, v1alpha1.LabelInitialized, "true") // Ready once, NotReady now
	hung := launch(t, ng).NodeName
	r, clk, _, events := reconciler()
	for range 24 { // a day, an hour at a time
		clk.Step(time.Hour)
		if n := reconcileAll(t, r, []string{hung}); n == 1 {
			return
		}
	}
	for _, e := range events.For(hung) {
		if e.Reason == launchtimeout.ReasonLaunchTimeoutCapped {
			t.Logf("event: %s", e.Message)
		}
	}
	t.Fatalf("a node never Ready for 24h was kept because the group's one other node is NotReady")
}

// TestANodeThatRanPodsIsNotAFailedLaunch: a node was Ready and ran a
// workload's pod while berth did not watch it (no leader, or the
// launchtimeout reconcile never ran between Ready and NotReady), so it
// never got berth.dev/initialized; now its kubelet stopped posting status
// (Ready Unknown, NodeStatusUnknown: the node lifecycle controller's
// verdict on a node that had posted). Karpenter's liveness deletes only a
// NodeClaim whose Node never registered; Cluster Autoscaler deletes only
// unregistered nodes and drains unready ones through scale-down. berth
// deleted it, undrained, with its Running pod, as a failed launch; now it
// labels it up (repair's matter) and says why.
func TestANodeThatRanPodsIsNotAFailedLaunch(t *testing.T) {
	ctx := context.Background()
	inst := launch(t, createGroup(t, "ran-pods", time.Hour))
	setReadyCondition(t, inst.NodeName, corev1.NodeCondition{Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."})
	podOn(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ran-pods-web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, inst.NodeName, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodRunning
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	r, clk, _, events := reconciler()
	clk.Step(time.Hour)
	if n := reconcileAll(t, r, []string{inst.NodeName}); n != 0 {
		for _, e := range events.For(inst.NodeName) {
			t.Logf("event %s: %s", e.Reason, e.Message)
		}
		t.Fatalf("a node whose Running pod shows it was Ready was deleted as a failed launch, undrained")
	}
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, node); err != nil || node.Labels[v1alpha1.LabelInitialized] != "true" {
		t.Errorf("node %s: want it labelled %s (it was up) (%v)", inst.NodeName, v1alpha1.LabelInitialized, err)
	}
	if ev := events.For(inst.NodeName); len(ev) != 1 || ev[0].Reason != launchtimeout.ReasonWasUp {
		t.Errorf("events %+v, want one %s", ev, launchtimeout.ReasonWasUp)
	}
}

// TestAnOperatorPodOnABrokenNodeIsNoProofItWasUp: the classic failed
// launch: the kubelet runs but the CNI never initialises, so the node is
// NotReady (KubeletNotReady, network not ready) from its registration on
// and carries node.kubernetes.io/not-ready:NoSchedule. A Deployment's pod
// that tolerates every taint and runs on the host network (tigera-operator,
// cilium-operator are such Deployments) is scheduled there and runs. The
// node was never Ready; it must be deleted as a failed launch. (Found by
// a review of TestANodeThatRanPodsIsNotAFailedLaunch's fix.)
func TestAnOperatorPodOnABrokenNodeIsNoProofItWasUp(t *testing.T) {
	ctx := context.Background()
	inst := launch(t, createGroup(t, "rv6-cni", time.Hour))
	setReadyCondition(t, inst.NodeName, corev1.NodeCondition{Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized"})
	start := metav1.Now()
	// Its ReplicaSet's (no owner here: the garbage collector would take a
	// pod of a missing owner).
	podOn(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator-abc", Namespace: "default"},
		Spec: corev1.PodSpec{HostNetwork: true, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "quay.io/tigera/operator"}}}}, inst.NodeName, func(st *corev1.PodStatus) {
		st.Phase, st.StartTime = corev1.PodRunning, &start
	})
	r, clk, _, events := reconciler()
	clk.Step(time.Hour)
	if n := reconcileAll(t, r, []string{inst.NodeName}); n != 1 {
		node := &corev1.Node{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, node)
		for _, e := range events.For(inst.NodeName) {
			t.Logf("event %s: %s", e.Reason, e.Message)
		}
		t.Fatalf("a node never Ready (CNI broken) was kept, labelled %s=%q (%v): an operator pod tolerating every taint ran on it",
			v1alpha1.LabelInitialized, node.Labels[v1alpha1.LabelInitialized], err)
	}
}

// setReadyCondition writes the node's Ready condition.
func setReadyCondition(t *testing.T, node string, c corev1.NodeCondition) {
	t.Helper()
	c.Type, c.LastHeartbeatTime, c.LastTransitionTime = corev1.NodeReady, metav1.Now(), metav1.Now()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{c}
		return env.Client.Status().Update(context.Background(), n)
	}); err != nil {
		t.Fatal(err)
	}
}

// podOn creates a pod bound to node, then gives it the status status
// makes.
func podOn(t *testing.T, pod *corev1.Pod, node string, status func(*corev1.PodStatus)) {
	t.Helper()
	pod.Spec.NodeName = node
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		status(&pod.Status)
		return env.Client.Status().Update(context.Background(), pod)
	}); err != nil {
		t.Fatal(err)
	}
}
