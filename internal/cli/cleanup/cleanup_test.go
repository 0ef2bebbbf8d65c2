package cleanup_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cli/cleanup"
	"github.com/berth-dev/berth/internal/cloudprovider"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/testenv"
	"github.com/berth-dev/berth/internal/webhook"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestCleanupLeavesNothingActingWithoutBerth: after an uninstall, the
// webhook configuration, a gated pod, a drain in progress (but not one
// whose removal the provider accepted: that node is going), a NodeGroup's
// finalizer and berth's placeholder objects are what would act or block
// without berth; cleanup takes them away, leaves the node and its owner
// mark, and says so; run twice, it finds nothing more.
func TestCleanupLeavesNothingActingWithoutBerth(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("left", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Finalizers = []string{v1alpha1.FinalizerNodes}
	node := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, "left-a")
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	node.Annotations[v1alpha1.AnnotationDisruptionStarted] = "2026-01-01T00:00:00Z"
	node.Annotations[v1alpha1.AnnotationLaunchedBy] = "uid-of-left"
	going := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, "left-b")
	going.Spec.Taints = append(going.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	going.Annotations[v1alpha1.AnnotationDisruptionStarted] = "2026-01-01T00:00:00Z"
	going.Annotations[v1alpha1.AnnotationRemovalAccepted] = "2026-01-01T00:05:00Z"
	going.Annotations[v1alpha1.AnnotationLaunchedBy] = "uid-of-left"
	gated := b.Pod("gated", b.NoUID(), func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}, {Name: "example.com/theirs"}}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SystemNamespace}}
	labels := map[string]string{v1alpha1.LabelHeadroom: "h", v1alpha1.LabelHeadroomRole: "placeholder"}
	placeholders := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "headroom-h", Namespace: v1alpha1.SystemNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: b.Pod("x").Spec}}}
	hook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ConfigName}}
	for _, o := range []client.Object{ng, node, going, gated, ns, placeholders, hook} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	out := &bytes.Buffer{}
	if err := cleanup.Run(ctx, env.Client, out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"webhook configurations deleted: 1", "pods ungated: 1", "drains stopped on nodes: 1", "node left-b stays tainted", "node group finalizers removed: 1", "placeholder and reserve objects deleted: 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hook), hook); !apierrors.IsNotFound(err) {
		t.Errorf("webhook configuration: %v, want it deleted", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gated), gated); err != nil || len(gated.Spec.SchedulingGates) != 1 || gated.Spec.SchedulingGates[0].Name != "example.com/theirs" {
		t.Errorf("gated pod: %v, gates %v; want only the other controller's gate left", err, gated.Spec.SchedulingGates)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == v1alpha1.TaintDisrupted {
			t.Errorf("node still tainted %s", v1alpha1.TaintDisrupted)
		}
	}
	if node.Annotations[v1alpha1.AnnotationDisruptionStarted] != "" || node.Annotations[v1alpha1.AnnotationLaunchedBy] == "" {
		t.Errorf("node annotations %v: want the drain's gone and the owner mark kept", node.Annotations)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(going), going); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(going.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintDisrupted }) {
		t.Errorf("node %s, whose removal its provider accepted, was untainted: pods could land on a machine that goes", going.Name)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), ng); err != nil || len(ng.Finalizers) != 0 {
		t.Errorf("node group: %v, finalizers %v; want none", err, ng.Finalizers)
	}
	out.Reset()
	if err := cleanup.Run(ctx, env.Client, out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), ": 0\n") != 5 {
		t.Errorf("a second cleanup did something: %q", out.String())
	}
}
