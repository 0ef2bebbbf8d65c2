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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// preferring is a Deployment of one pod of cpu that prefers node and may
// tolerate every taint (as agents often do).
func (f *fixture) preferring(name, cpu, node string, tolerateAll bool) {
	f.t.Helper()
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{
		NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
		Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: v1alpha1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
		Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
	}
	if tolerateAll {
		spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
	}}
	if err := env.Client.Create(context.Background(), d); err != nil {
		f.t.Fatal(err)
	}
}

// TestAPodThatComesBackToTheDrainingNodeGoesWithIt: an agent (500m, a
// toleration of every taint, preferring node x) and a web pod (1 cpu,
// preferring y). x is the emptier and its agent fits on y: x is drained.
// The agent is evicted (its PodDisruptionBudget would decide), and the
// pod made again for it lands on x again, which it tolerates and
// prefers. Evicted again, it would come back again until the drain timed
// out; berth leaves it: x is removed with it, and the agent runs again on
// y.
func TestAPodThatComesBackToTheDrainingNodeGoesWithIt(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-comes-back", 2)
	x, y := f.nodes[0], f.nodes[1]
	f.preferring("agent", "500m", x, true)
	f.preferring("web", "1", y, false)
	f.waitRunning(2)
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	var agent types.NamespacedName
	var agentUID types.UID
	for _, p := range pods.Items {
		if p.Labels["app"] == "agent" {
			if p.Spec.NodeName != x {
				t.Fatalf("the agent runs on %s, want %s", p.Spec.NodeName, x)
			}
			agent, agentUID = client.ObjectKeyFromObject(&p), p.UID
		}
	}
	f.clk.SetTime(time.Now()) // the drain starts now: the pods there are older
	evicted, removed := false, false
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		f.run()
		if n := f.node(x); n == nil || n.DeletionTimestamp != nil {
			removed = true
			return true, "", nil
		}
		p := &corev1.Pod{}
		err := env.Client.Get(ctx, agent, p)
		if client.IgnoreNotFound(err) != nil {
			return false, "", err
		}
		evicted = evicted || err != nil || p.UID != agentUID || p.DeletionTimestamp != nil
		return false, fmt.Sprintf("%s not removed yet (the agent evicted: %v)", x, evicted), nil
	})
	if !removed || !evicted {
		t.Fatalf("node %s removed %v, the agent that ran there evicted before %v; want both", x, removed, evicted)
	}
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName == y {
				running++
			}
		}
		return running == 2, fmt.Sprintf("%d of 2 pods running on %s, the node that stays", running, y), nil
	})
}
