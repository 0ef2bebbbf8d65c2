package disruption_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// agents creates a DaemonSet of the fixture's group named name (a log
// shipper), with the pod annotations and volumes given, and waits for its
// pod on each of the fixture's nodes.
func (f *fixture) agents(name string, annotations map[string]string, volumes ...corev1.Volume) {
	f.t.Helper()
	labels := map[string]string{"agent": name}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
			Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "agent", Image: "agent", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			Volumes: volumes,
		}},
	}}
	if err := env.Client.Create(context.Background(), ds); err != nil {
		f.t.Fatal(err)
	}
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns), client.MatchingLabels(labels)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == len(f.nodes), fmt.Sprintf("%d of %d agents running", running, len(f.nodes)), nil
	})
}

// recordEvictions has the controller's client record the pods it asks the
// Eviction API to evict.
func (f *fixture) recordEvictions() func() []string {
	var mu sync.Mutex
	var evicted []string
	f.ctrl.Client = interceptor.NewClient(env.WatchingClient(f.t), interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			if sub == "eviction" {
				mu.Lock()
				evicted = append(evicted, obj.GetName())
				mu.Unlock()
			}
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		}})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(evicted)
	}
}

// agentOn is the name of the pod of DaemonSet name on node.
func (f *fixture) agentOn(name, node string) string {
	f.t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns), client.MatchingLabels{"agent": name},
		client.MatchingFields{"spec.nodeName": node}); err != nil || len(pods.Items) != 1 {
		f.t.Fatalf("agent %s on node %s: %d pods (%v)", name, node, len(pods.Items), err)
	}
	return pods.Items[0].Name
}

// TestTheDaemonSetPodsOfARemovedNodeAreEvicted: a node to remove runs a
// Deployment's pod and two DaemonSets' agents, one of which opts out
// (Cluster Autoscaler's enable-ds-eviction "false"). Once the
// Deployment's pod has moved, the agent is evicted before the node goes,
// as Cluster Autoscaler does (--daemonset-eviction-for-occupied-nodes):
// a log shipper gets its SIGTERM through the API. The other is not.
func TestTheDaemonSetPodsOfARemovedNodeAreEvicted(t *testing.T) {
	f := setup(t, "sd-agents", 2)
	f.deploymentOf(2, "500m")
	f.agents("shipper", nil)
	f.agents("keeper", map[string]string{disruption.AnnotationEnableDaemonSetEviction: "false"})
	evicted := f.recordEvictions()
	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("started %v, want one node drained", res.Started)
	}
	victim := res.Started[0]
	shipper, keeper := f.agentOn("shipper", victim), f.agentOn("keeper", victim)
	f.removedWithin(victim, time.Minute)
	got := evicted()
	if !slices.Contains(got, shipper) {
		t.Errorf("node %s removed; evictions asked %v, want its agent %s among them", victim, got, shipper)
	}
	if slices.Contains(got, keeper) {
		t.Errorf("evictions asked %v: agent %s opted out (enable-ds-eviction: false)", got, keeper)
	}
	if i, j := slices.IndexFunc(got, func(s string) bool { return s != shipper && s != keeper }), slices.Index(got, shipper); i < 0 || j < i {
		t.Errorf("evictions asked %v, want the Deployment's pod evicted before the agent", got)
	}
}

// TestTheDaemonSetPodsOfAnEmptyNodeGoWithIt: a node removed empty (only
// agents on it) goes without its agents evicted, as Cluster Autoscaler's
// --daemonset-eviction-for-empty-nodes is off by default.
func TestTheDaemonSetPodsOfAnEmptyNodeGoWithIt(t *testing.T) {
	f := setup(t, "sd-agents-empty", 2)
	f.agents("shipper", nil)
	evicted := f.recordEvictions()
	res := f.run()
	if len(res.Started) == 0 {
		t.Fatalf("started %v, want an empty node drained", res.Started)
	}
	victim := res.Started[0]
	shipper := f.agentOn("shipper", victim)
	f.removedWithin(victim, time.Minute)
	if got := evicted(); slices.Contains(got, shipper) {
		t.Errorf("evictions asked %v: agent %s of the node removed empty, want it left to go with the node", got, shipper)
	}
}
