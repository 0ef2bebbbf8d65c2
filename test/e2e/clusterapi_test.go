package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestClusterAPIScaleFromZeroAndRemoveTheChosenMachine drives berth
// against real Cluster API core controllers (built from their Go module)
// with the test's KWOK-backed infrastructure provider. A MachineDeployment
// at 0 replicas carries Cluster Autoscaler's annotations: max 3 replicas,
// 4 cpu and 8Gi per machine, and a node label. The NodeGroup's own
// instance type says 1 cpu, and the pods ask for 3 cpu and that label, so
// they fit only what the annotations describe. Two pending pods make the
// MachineDeployment grow to 2, two Machines get nodes, berth adopts them
// and the pods run. Then one pod goes: berth drains its node and Cluster
// API deletes exactly that node's Machine; the other Machine stays.
func TestClusterAPIScaleFromZeroAndRemoveTheChosenMachine(t *testing.T) {
	if os.Getenv("BERTH_E2E_CLUSTERAPI") == "0" {
		t.Skip("BERTH_E2E_CLUSTERAPI=0")
	}
	ctx := context.Background()
	installClusterAPI(t)
	ns := newNamespace(t)
	runKWOKInfrastructure(t, ns)
	createWorkloadCluster(t, ns)
	md := createMachineDeployment(t, ns, "md", map[string]string{
		clusterapi.AnnotationMinSize: "0", clusterapi.AnnotationMaxSize: "3",
		clusterapi.AnnotationCPU: "4", clusterapi.AnnotationMemory: "8Gi", clusterapi.AnnotationMaxPods: "110",
		clusterapi.AnnotationLabels: "e2e.berth.dev/capi=true",
	}, nil)

	after := metav1.Duration{Duration: 2 * time.Second}
	ng := b.NodeGroup("capi", b.Size(0, 10), b.InstanceType("capi-small", "1", "1Gi", b.OnDemand("zone-capi", "0.20")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: md}}
	ng.Spec.Disruption.ConsolidateAfter = &after
	createNodeGroup(t, ng)
	startController(t, "--clusterapi", "--scale-down-interval=1s")

	start := time.Now()
	for _, name := range []string{"a", "b"} {
		pod := b.Pod(name, b.CPU("3"))
		pod.Namespace, pod.UID = ns, ""
		pod.Spec.NodeSelector = map[string]string{"e2e.berth.dev/capi": "true"}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, ns, 2, 3*time.Minute)
	t.Logf("2 pending pods -> MachineDeployment 0 -> 2 replicas, 2 nodes joined and adopted, pods Running in %s", time.Since(start).Round(time.Second))
	if got := replicas(t, ns, md); got != 2 {
		t.Fatalf("MachineDeployment replicas = %d, want 2", got)
	}
	// The pods' node selector is the MachineDeployment's label: they may
	// run before berth's adoption controller has labelled the second node.
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		n := len(groupNodes(t, "capi"))
		return n == 2, fmt.Sprintf("node group capi has %d adopted nodes, want 2", n), nil
	})
	machinesBefore := machineNames(t, ns)
	if len(machinesBefore) != 2 {
		t.Fatalf("machines = %v, want 2", machinesBefore)
	}

	// Remove pod a: its node is empty and must be the one removed.
	podA := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, podA); err != nil {
		t.Fatal(err)
	}
	podB := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, podB); err != nil {
		t.Fatal(err)
	}
	chosen, kept := podA.Spec.NodeName, podB.Spec.NodeName
	if err := env.Client.Delete(ctx, podA, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	expect.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		ms := machineNames(t, ns)
		return len(ms) == 1 && ms[0] == kept && replicas(t, ns, md) == 1,
			fmt.Sprintf("machines %v (want only %s), replicas %d", ms, kept, replicas(t, ns, md)), nil
	})
	t.Logf("empty node %s drained, its Machine marked and deleted, replicas 2 -> 1, in %s; machine %s kept", chosen, time.Since(start).Round(time.Second), kept)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: chosen}, &corev1.Node{})
		return apierrors.IsNotFound(err), "node " + chosen + " still exists", client.IgnoreNotFound(err)
	})
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, pod); err != nil || pod.Spec.NodeName != kept || pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod b should still run on %s: %v %s %s", kept, err, pod.Spec.NodeName, pod.Status.Phase)
	}
}

// TestClusterAPIMachineWithoutInfrastructureFallsBack: the cheaper group
// is a MachineDeployment whose machines never get infrastructure (the
// test provider's spec.fail). With a machine timeout of 3 s, the next
// launch of that group fails with InsufficientCapacity, berth removes the
// stuck Machine (replicas back to 0), the group shows LaunchFailing, and
// the pod runs on the pricier KWOK group: the same fallback as for any
// provider.
func TestClusterAPIMachineWithoutInfrastructureFallsBack(t *testing.T) {
	if os.Getenv("BERTH_E2E_CLUSTERAPI") == "0" {
		t.Skip("BERTH_E2E_CLUSTERAPI=0")
	}
	ctx := context.Background()
	installClusterAPI(t)
	ns := newNamespace(t)
	runKWOKInfrastructure(t, ns)
	createWorkloadCluster(t, ns)
	md := createMachineDeployment(t, ns, "broken", map[string]string{
		clusterapi.AnnotationCPU: "4", clusterapi.AnnotationMemory: "8Gi", clusterapi.AnnotationLabels: "e2e.berth.dev/fallback=true",
	}, map[string]any{"fail": true})
	capi := b.NodeGroup("capi-broken", b.Size(0, 5), b.InstanceType("capi-cheap", "4", "8Gi", b.OnDemand("zone-capi", "0.05")))
	capi.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: md,
		MachineTimeout: &metav1.Duration{Duration: 3 * time.Second}}}
	createNodeGroup(t, capi)
	kwok := b.NodeGroup("capi-fallback", b.Size(0, 5), b.InstanceType("kwok-4", "4", "8Gi", b.OnDemand("zone-a", "0.50")),
		b.TemplateLabel("e2e.berth.dev/fallback", "true"))
	createNodeGroup(t, kwok)
	startController(t, "--clusterapi")

	start := time.Now()
	pod := b.Pod("p", b.CPU("3"))
	pod.Namespace, pod.UID = ns, ""
	pod.Spec.NodeSelector = map[string]string{"e2e.berth.dev/fallback": "true"}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, 1, 2*time.Minute)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1alpha1.LabelNodeGroup] != "capi-fallback" {
		t.Fatalf("pod runs on %s of group %q, want the fallback group", node.Name, node.Labels[v1alpha1.LabelNodeGroup])
	}
	t.Logf("machine without infrastructure -> InsufficientCapacity -> pod Running on the KWOK fallback group in %s", time.Since(start).Round(time.Second))
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		ng := &v1alpha1.NodeGroup{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "capi-broken"}, ng); err != nil {
			return false, "", err
		}
		failing := false
		for _, c := range ng.Status.Conditions {
			failing = failing || (c.Type == v1alpha1.ConditionLaunchFailing && c.Status == metav1.ConditionTrue)
		}
		ms := machineNames(t, ns)
		return failing && len(ms) == 0 && replicas(t, ns, md) == 0,
			fmt.Sprintf("LaunchFailing %v, machines %v, replicas %d", failing, ms, replicas(t, ns, md)), nil
	})
}

// createWorkloadCluster creates the Cluster (the dev cluster itself, via
// its kubeconfig secret) and a control plane object that reports itself
// initialized: Cluster API then connects to the cluster and watches its
// nodes.
func createWorkloadCluster(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	kubeconfig, err := os.ReadFile(env.Cluster.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2e-kubeconfig", Namespace: ns, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "e2e"}},
		Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": kubeconfig}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cp := obj(infraGroup+"/"+infraVersion, "KWOKControlPlane", ns, "cp", map[string]any{})
	if err := env.Client.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cp.Object, true, "status", "initialization", "controlPlaneInitialized")
	// An externally managed control plane (as EKS or AKS): Cluster API
	// then deletes a worker Machine's Node without looking for control
	// plane Machines.
	_ = unstructured.SetNestedField(cp.Object, true, "status", "externalManagedControlPlane")
	if err := env.Client.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	cluster := obj(capiGV.String(), "Cluster", ns, "e2e", map[string]any{
		"controlPlaneRef":      map[string]any{"apiGroup": infraGroup, "kind": "KWOKControlPlane", "name": "cp"},
		"controlPlaneEndpoint": map[string]any{"host": "127.0.0.1", "port": int64(6443)},
	})
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	// Cluster API's finalizers need its manager: delete the Cluster (and
	// with it what is left) while it still runs.
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, cluster)
		poll(time.Minute, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
		})
	})
}

// createMachineDeployment creates a MachineDeployment of KWOK machines (4
// cpu, 8Gi, label e2e.berth.dev/capi=true) at 0 replicas with the given
// annotations, and deletes it (and waits for its Machines) at the end.
func createMachineDeployment(t *testing.T, ns, name string, annotations map[string]string, machineSpec map[string]any) string {
	t.Helper()
	ctx := context.Background()
	spec := map[string]any{"capacity": map[string]any{"cpu": "4", "memory": "8Gi"}, "nodeLabels": map[string]any{"e2e.berth.dev/capi": "true"}}
	for k, v := range machineSpec {
		spec[k] = v
	}
	tmpl := obj(infraGroup+"/"+infraVersion, "KWOKMachineTemplate", ns, name, map[string]any{"template": map[string]any{"spec": spec}})
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": "e2e", "cluster.x-k8s.io/deployment-name": name}
	md := obj(capiGV.String(), "MachineDeployment", ns, name, map[string]any{
		"clusterName": "e2e", "replicas": int64(0),
		// What Cluster API's defaulting webhook would set (no webhook runs).
		"rollout": map[string]any{"strategy": map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)}}},
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{
				"clusterName":       "e2e",
				"bootstrap":         map[string]any{"dataSecretName": "bootstrap-data"},
				"infrastructureRef": map[string]any{"apiGroup": infraGroup, "kind": "KWOKMachineTemplate", "name": name},
			},
		},
	})
	md.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "e2e"})
	md.SetAnnotations(annotations)
	if err := env.Client.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, md)
		poll(time.Minute, func() bool { return len(machineNames(t, ns)) == 0 })
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{"e2e.berth.dev/capi": "true"})
	})
	return name
}

func obj(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// machineNames lists the live Machines of the namespace by the name of
// their node (or their own name before they have one), sorted.
func machineNames(t *testing.T, ns string) []string {
	t.Helper()
	list := listOf(machineListGVK)
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list.Items {
		if m.GetDeletionTimestamp() != nil {
			continue
		}
		name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		if name == "" {
			name = "machine:" + m.GetName()
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func replicas(t *testing.T, ns, name string) int64 {
	t.Helper()
	md := &unstructured.Unstructured{}
	md.SetGroupVersionKind(machineDeplGVK)
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	return r
}

func poll(timeout time.Duration, cond func() bool) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline) && !cond(); {
		time.Sleep(500 * time.Millisecond)
	}
}
