package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestIdleNodesGoWhileAnUnplaceablePodWaits: a pod no node group can host
// (a node selector nothing has) waits the whole time; a Deployment of 6
// pods on 3 nodes shrinks to 1 pod, and its idle nodes are removed all the
// same.
func TestIdleNodesGoWhileAnUnplaceablePodWaits(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	after := metav1.Duration{Duration: 2 * time.Second}
	all := intstr.FromString("100%")
	ng := b.NodeGroup("unplaceable", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidateAfter, ng.Spec.Disruption.Budget = &after, &all
	createNodeGroup(t, ng)
	d := webDeployment(ns, "unplaceable", 6)
	stuck := b.Pod("stuck", b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.NodeSelector("disk", "nothing-has-it"))
	for _, o := range []client.Object{d, stuck} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, "--scale-down-interval=1s")
	expect.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		n := len(liveNodes(t, "unplaceable"))
		return n == 3, fmt.Sprintf("%d nodes for 6 web pods, want 3", n), nil
	})
	if err := env.Client.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		n := len(liveNodes(t, "unplaceable"))
		return n == 1, fmt.Sprintf("%d nodes for 1 web pod, want 1", n), nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stuck), stuck); err != nil || !podutil.AwaitsNode(stuck) {
		t.Errorf("the unplaceable pod: %v, want it still waiting the whole time", err)
	}
}

// TestABarePodBoundDuringADrainSurvives: a node is being drained (the one
// pod that must leave it is evicted but stays terminating: a finalizer
// holds it); a bare pod that tolerates every taint is bound to the node
// meanwhile. berth does not evict it: the removal is given up, the node
// untainted, and the event names the pod and the rule.
func TestABarePodBoundDuringADrainSurvives(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	after := metav1.Duration{Duration: 15 * time.Second}
	ng := b.NodeGroup("late-pod", b.Size(0, 4), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Disruption.ConsolidateAfter = &after
	ng.Spec.Disruption.DrainTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	createNodeGroup(t, ng)
	d := webDeployment(ns, "late-pod", 2)
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{b.AffinityTerm(v1alpha1.LabelHostname, "app", "web")}}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	startController(t, "--scale-down-interval=1s")
	waitRunning(t, ns, 2, 3*time.Minute)
	if err := env.Client.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	// The node the Deployment left gets a movable pod that stays
	// terminating once evicted: its drain lasts.
	var victim string
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		used := map[string]bool{}
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				used[p.Spec.NodeName] = true
			}
		}
		for _, n := range liveNodes(t, "late-pod") {
			if !used[n.Name] && len(pods.Items) == 1 {
				victim = n.Name
			}
		}
		return victim != "", "the Deployment has not shrunk to one pod yet", nil
	})
	held := b.Pod("held", b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.NodeName(victim),
		b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true"),
		func(p *corev1.Pod) { p.Finalizers = []string{"e2e.berth.dev/hold"} })
	if err := env.Client.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(context.Background(), held, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(held), held)
		return err == nil && held.DeletionTimestamp != nil, "the held pod on " + victim + " was not evicted yet (drain not started)", err
	})
	debug := b.Pod("debug", b.Namespace(ns), b.NoUID(), b.CPU("50m"), b.NodeName(victim),
		func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} })
	if err := env.Client.Create(ctx, debug); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		for _, e := range events(t, "default", victim) {
			if strings.HasPrefix(e, "DrainStopped") && strings.Contains(e, ns+"/debug") && strings.Contains(e, "NotReplicated") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("no DrainStopped event naming %s/debug: %v", ns, events(t, "default", victim)), nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(debug), debug); err != nil || debug.DeletionTimestamp != nil {
		t.Fatalf("the bare pod: %v (deleting %v), want it untouched", err, debug.DeletionTimestamp != nil)
	}
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: victim}, node); err != nil {
		t.Fatalf("node %s: %v, want it kept", victim, err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == v1alpha1.TaintDisrupted {
			t.Errorf("node %s still tainted after the drain was given up", victim)
		}
	}
}

// TestBerthsAccountCannotChangeAPodsImage: berth's service account may
// patch pods (its scheduling gates, labels and annotations), but an image
// change through that right is refused by the admission policy.
func TestBerthsAccountCannotChangeAPodsImage(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	pod := b.Pod("app", b.Namespace(ns), b.NoUID(), b.CPU("10m"), b.NodeSelector("disk", "none"))
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", controllerKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	berth, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	image := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"containers":[{"name":"app","image":"attacker.example/evil"}]}}`))
	if err := berth.Patch(ctx, pod, image); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("an image change by berth's account: %v, want it refused", err)
	}
	label := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"berth.dev/companion-share-key":"x"}}}`))
	if err := berth.Patch(ctx, pod, label); err != nil {
		t.Errorf("a berth.dev/ label by berth's account: %v, want it allowed", err)
	}
}

// TestAClusterAPIGroupWhoseRemovalWouldBeRefusedIsNotDrained: another
// Machine of the MachineDeployment carries a delete mark berth did not
// set, so berth would refuse to lower the replicas (Cluster API could
// delete that Machine instead of the one berth chose). Scale-down drains
// none of the group's nodes meanwhile: the empty node stays, its Machine
// unmarked, the replicas unchanged. (Before, it was drained, its removal
// refused, the drain given up and started again.) Once the foreign mark
// is gone, the empty node's removal takes exactly its Machine.
func TestAClusterAPIGroupWhoseRemovalWouldBeRefusedIsNotDrained(t *testing.T) {
	if os.Getenv("BERTH_E2E_CLUSTERAPI") == "0" {
		t.Skip("BERTH_E2E_CLUSTERAPI=0")
	}
	ctx := context.Background()
	installClusterAPI(t)
	ns := newNamespace(t)
	runKWOKInfrastructure(t, ns)
	createWorkloadCluster(t, ns)
	md := createMachineDeployment(t, ns, "half", map[string]string{
		clusterapi.AnnotationMinSize: "0", clusterapi.AnnotationMaxSize: "3",
		clusterapi.AnnotationCPU: "4", clusterapi.AnnotationMemory: "8Gi", clusterapi.AnnotationMaxPods: "110",
		clusterapi.AnnotationLabels: "e2e.berth.dev/capi=true", // what the test infrastructure gives its nodes
	}, nil)
	after := metav1.Duration{Duration: 2 * time.Second}
	ng := b.NodeGroup("capi-half", b.Size(0, 10), b.InstanceType("capi-small", "1", "1Gi", b.OnDemand("zone-capi", "0.20")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: md}}
	ng.Spec.Disruption.ConsolidateAfter = &after
	ng.Spec.Disruption.DrainTimeout = &metav1.Duration{Duration: 15 * time.Second}
	createNodeGroup(t, ng)
	startController(t, "--clusterapi", "--scale-down-interval=1s")
	for _, name := range []string{"a", "b", "c"} {
		pod := b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("3"), b.NodeSelector("e2e.berth.dev/capi", "true"))
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, ns, 3, 4*time.Minute)
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		n := len(groupNodes(t, "capi-half"))
		return n == 3, fmt.Sprintf("node group has %d adopted nodes, want 3", n), nil
	})
	nodeOf := func(pod string) string {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
			t.Fatal(err)
		}
		return p.Spec.NodeName
	}
	foreignNode, firstNode, secondNode := nodeOf("c"), nodeOf("a"), nodeOf("b")
	// Someone else's delete mark on c's Machine: berth will refuse to
	// lower the replicas while it is there.
	setMachineAnnotation(t, ns, foreignNode, clusterapi.AnnotationDeleteMachine, "by-hand")
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// The group is held: a's empty node is not drained, its Machine not
	// marked, the replicas not lowered (a few dozen scale-down rounds).
	poll(30*time.Second, func() bool {
		for _, e := range events(t, "default", firstNode) {
			if strings.HasPrefix(e, disruption.ReasonDisrupting) || strings.HasPrefix(e, disruption.ReasonDrainTimedOut) {
				t.Fatalf("node %s was drained while another Machine carried a foreign delete mark: %v", firstNode, events(t, "default", firstNode))
			}
		}
		if a := machineAnnotations(t, ns, firstNode); a[v1alpha1.AnnotationDeleteRequestedBy] != "" {
			t.Fatalf("machine of %s marked for removal while the group is held: %v", firstNode, a)
		}
		return false
	})
	if got := replicas(t, ns, md); got != 3 {
		t.Fatalf("replicas %d while the group is held, want 3", got)
	}
	// The foreign mark goes; berth removes the empty node: its Machine,
	// not another.
	setMachineAnnotation(t, ns, foreignNode, clusterapi.AnnotationDeleteMachine, "")
	expect.Eventually(t, 3*time.Minute, func(context.Context) (bool, string, error) {
		ms := machineNames(t, ns)
		return replicas(t, ns, md) == 2 && !contains(ms, firstNode),
			fmt.Sprintf("replicas %d, machines %v; want 2 and %s's Machine gone", replicas(t, ns, md), ms, firstNode), nil
	})
	poll(15*time.Second, func() bool { return false }) // give a stale mark time to do harm
	ms := machineNames(t, ns)
	if got := replicas(t, ns, md); got != 2 || !contains(ms, secondNode) || !contains(ms, foreignNode) {
		t.Errorf("replicas %d, machines %v: want 2, with %s and %s kept", got, ms, secondNode, foreignNode)
	}
	t.Logf("no drain while the foreign mark held the group; then the removal took only %s", firstNode)
}

// machineOf is the Machine whose node is node.
func machineOf(t *testing.T, ns, node string) *unstructured.Unstructured {
	t.Helper()
	list := listOf(machineListGVK)
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if name, _, _ := unstructured.NestedString(list.Items[i].Object, "status", "nodeRef", "name"); name == node {
			return &list.Items[i]
		}
	}
	t.Fatalf("no Machine of node %s", node)
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// machineAnnotations are the annotations of the Machine of a node.
func machineAnnotations(t *testing.T, ns, node string) map[string]string {
	t.Helper()
	m := machineOf(t, ns, node)
	return m.GetAnnotations()
}

// setMachineAnnotation sets (or, with an empty value, removes) an
// annotation of the Machine of a node.
func setMachineAnnotation(t *testing.T, ns, node, key, value string) {
	t.Helper()
	m := machineOf(t, ns, node)
	a := m.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if value == "" {
		delete(a, key)
	} else {
		a[key] = value
	}
	m.SetAnnotations(a)
	if err := env.Client.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}
