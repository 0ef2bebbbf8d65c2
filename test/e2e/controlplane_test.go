package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return name
}

// createKWOKNode creates a node that KWOK runs and deletes it afterwards.
func createKWOKNode(t *testing.T, name, cpu, memory string, opts ...builders.NodeOption) *corev1.Node {
	t.Helper()
	n := builders.Node(name, cpu, memory, append([]builders.NodeOption{builders.KWOK(), builders.NotReady()}, opts...)...)
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return n
}

func podRunningOn(ctx context.Context, key client.ObjectKey) (bool, string, error) {
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, key, p); err != nil {
		return false, err.Error(), nil
	}
	return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning,
		fmt.Sprintf("pod %s is %s on node %q", key.Name, p.Status.Phase, p.Spec.NodeName), nil
}

// TestSchedulerBindsPodAndKWOKRunsIt: a pod created on the control plane
// that berth dev up started is bound by the real kube-scheduler to a KWOK
// node, and KWOK reports it Running.
func TestSchedulerBindsPodAndKWOKRunsIt(t *testing.T) {
	ns := newNamespace(t)
	node := createKWOKNode(t, "e2e-bind", "4", "8Gi")
	pod := builders.Pod("web", builders.Namespace(ns), builders.NoUID(), builders.CPU("500m"), builders.Memory("256Mi"))
	ctx := context.Background()
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		return podRunningOn(ctx, client.ObjectKeyFromObject(pod))
	})
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != node.Name {
		t.Errorf("pod bound to %q, want %q", got.Spec.NodeName, node.Name)
	}
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Errorf("KWOK did not make node %s Ready: %+v", node.Name, n.Status.Conditions)
	}
}

// TestKWOKRenewsNodeLeases: a fake kubelet renews its node's Lease, as a
// real one does every 10 s. Without it the node lifecycle controller marks
// every KWOK node NotReady once its grace period is over (its status
// heartbeat comes every 10 minutes), taints it and evicts its pods: every
// test longer than the grace period saw nodes flap.
func TestKWOKRenewsNodeLeases(t *testing.T) {
	node := createKWOKNode(t, "e2e-lease", "2", "4Gi")
	var first time.Time
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, l); err != nil {
			return false, err.Error(), nil
		}
		if l.Spec.RenewTime == nil {
			return false, "lease has no renew time", nil
		}
		if first.IsZero() {
			first = l.Spec.RenewTime.Time
		}
		return l.Spec.RenewTime.After(first), fmt.Sprintf("lease renewed at %s, first seen %s", l.Spec.RenewTime.Time, first), nil
	})
}

// TestControllerManagerAndDisruptionController: a Deployment's ReplicaSet
// creates its pods (the deployment and replicaset controllers run) and a
// PodDisruptionBudget over them gets its status computed (the disruption
// controller runs; scale-down relies on it).
func TestControllerManagerAndDisruptionController(t *testing.T) {
	ns := newNamespace(t)
	createKWOKNode(t, "e2e-deploy", "4", "8Gi")
	ctx := context.Background()
	replicas := int32(3)
	labels := map[string]string{"app": "web"}
	tmpl := builders.Pod("web", builders.Labels("app", "web"), builders.CPU("100m"))
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
		},
	}
	minAvailable := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	for _, o := range []client.Object{deploy, pdb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3, fmt.Sprintf("%d pods, %d running", len(pods.Items), running), nil
	})
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		got := &policyv1.PodDisruptionBudget{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
			return false, "", err
		}
		s := got.Status
		return s.ExpectedPods == 3 && s.CurrentHealthy == 3 && s.DesiredHealthy == 2 && s.DisruptionsAllowed == 1,
			fmt.Sprintf("PDB status %+v", s), nil
	})
}

// TestDevLifecycle runs a second control plane through the CLI: up on a
// running cluster says so and exits 0, status reports a dead component with
// its log, down stops exactly the processes up started and removes the
// state.
func TestDevLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	if out, err := berth("dev", "up", "--dir", dir); err != nil {
		t.Fatalf("dev up: %v\n%s", err, out)
	}
	c, err := devenv.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })

	out, err := berth("dev", "up", "--dir", dir)
	if err != nil || !strings.Contains(out, "already running") {
		t.Errorf("second dev up: err=%v, output:\n%s", err, out)
	}
	out, err = berth("dev", "status", "--dir", dir)
	if err != nil || strings.Count(out, "healthy") != 5 {
		t.Errorf("status of a healthy cluster: err=%v, output:\n%s", err, out)
	}

	var kwok *devenv.Process
	for _, p := range c.Processes {
		if p.Name == devenv.KWOK {
			kwok = p
		}
	}
	if err := syscall.Kill(kwok.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 10*time.Second, func(context.Context) (bool, string, error) {
		return !kwok.Alive(), "kwok still alive", nil
	})
	out, err = berth("dev", "status", "--dir", dir)
	if err == nil {
		t.Errorf("status exits 0 with kwok dead:\n%s", out)
	}
	if !strings.Contains(out, "not running") || !strings.Contains(out, "last lines of "+kwok.LogFile) {
		t.Errorf("status does not report kwok dead with its log:\n%s", out)
	}

	if out, err := berth("dev", "down", "--dir", dir); err != nil {
		t.Fatalf("dev down: %v\n%s", err, out)
	}
	for _, p := range c.Processes {
		if p.Alive() {
			t.Errorf("%s (pid %d) still runs after dev down", p.Name, p.PID)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state folder %s still exists after dev down (err %v)", dir, err)
	}
}
