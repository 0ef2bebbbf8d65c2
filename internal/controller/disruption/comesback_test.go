package disruption_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestAPodThatToleratesTheDrainTaintGoesWithTheNode: two nodes, one pod
// each of a Deployment whose pods tolerate every taint (as agents often
// do), so one node's pod fits on the other. Evicted, such a pod's
// successor could land on the draining node again, the emptiest, and be
// evicted again until the drain times out. berth does not evict it: the
// node is removed with the pod on it, and the Deployment's pods run again
// on the node that stays.
func TestAPodThatToleratesTheDrainTaintGoesWithTheNode(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-comes-back", 2)
	labels := map[string]string{"app": "agent"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1alpha1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		}},
	}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	f.waitRunning(2)
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	on := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		on[p.Spec.NodeName] = p
	}
	var gone string
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		f.run()
		for _, name := range f.nodes {
			n := f.node(name)
			if n == nil || n.DeletionTimestamp != nil {
				gone = name
				continue
			}
			if !tainted(n) {
				continue
			}
			p := &corev1.Pod{}
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(ptr.To(on[name])), p)
			if client.IgnoreNotFound(err) != nil {
				return false, "", err
			}
			if err != nil || p.UID != on[name].UID || p.DeletionTimestamp != nil {
				return false, "", expect.Permanent(fmt.Errorf("pod %s was evicted from the draining node %s although it tolerates the taint", on[name].Name, name))
			}
		}
		return gone != "", "no node removed yet", nil
	})
	// The pod of the removed node is deleted once its node is gone
	// (kube-controller-manager's pod garbage collector) and made again.
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != gone {
				running++
			}
		}
		return running == 2, fmt.Sprintf("%d of 2 pods running on the node that stays", running), nil
	})
}
