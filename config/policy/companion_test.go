package policy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	ctrlcompanion "github.com/berth-dev/berth/internal/controller/companion"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestCompanionHeadroomWorksUnderThePolicies: the companion controller,
// as berth's account and under every policy and berth-system's Pod
// Security, does all its pod writes: it annotates a gated workload, the
// nomination is written as the provisioning round writes it, it creates
// the placeholder in berth-system and removes its gate; a companion takes
// the placeholder's room (annotation, deletion) and loses the hand-over
// gate.
func TestCompanionHeadroomWorksUnderThePolicies(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	namespace(t, "fuse")
	// Unstructured: the profile's type is changing while this is written
	// (recognize.namespace is new), and this test is about the writes.
	profile := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "CompanionProfile", "metadata": map[string]any{"name": "fuse"},
		"spec": map[string]any{
			"workloads": map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "fuse"}}},
			"companion": map[string]any{"resources": map[string]any{"cpu": "500m", "memory": "128Mi"}},
			"recognize": map[string]any{"namespace": "fuse", "selector": map[string]any{"matchLabels": map[string]any{"role": "fuse-companion"}}},
		},
	}}
	create(t, env.Client, profile)
	node := upNode(t, "fuse-node")
	w := b.Pod("workload", b.Namespace("fuse"), b.NoUID(), b.CPU("100m"), b.Labels("app", "fuse"))
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	create(t, env.Client, w)

	r := &ctrlcompanion.Reconciler{Client: berth, APIReader: berth, Recorder: &fakes.Recorder{}, Clock: clock.RealClock{}, PauseImage: "registry.k8s.io/pause:3.10"}
	run := func(p *corev1.Pod) {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatalf("reconciling %s: %v", p.Name, err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	run(w)
	if w.Annotations[v1alpha1.AnnotationCompanionRequests] == "" {
		t.Fatalf("the workload was not annotated with its companion: %v", w.Annotations)
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Status.NominatedNodeName = node.Name
	if err := berth.Status().Patch(ctx, w, patch); err != nil {
		t.Fatalf("nominating the workload: %v", err)
	}
	run(w)
	if companion.Gated(w) {
		t.Fatalf("the workload is still gated: %v", w.Spec.SchedulingGates)
	}
	ph := &corev1.Pod{}
	phKey := client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ctrlcompanion.PlaceholderName(w.Labels[v1alpha1.LabelCompanionShareKey], node.Name)}
	if err := env.Client.Get(ctx, phKey, ph); err != nil {
		t.Fatalf("the placeholder: %v", err)
	}

	c := b.Pod("companion", b.Namespace("fuse"), b.NoUID(), b.CPU("500m"), b.Labels("role", "fuse-companion"))
	c.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanionHandover}}
	c.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name}}}}},
	}}}
	create(t, env.Client, c)
	run(c)
	if len(c.Spec.SchedulingGates) != 0 || c.Annotations["berth.dev/took-companion-room"] == "" {
		t.Errorf("the companion: gates %v, annotations %v; want ungated, having taken the placeholder's room", c.Spec.SchedulingGates, c.Annotations)
	}
	if err := env.Client.Get(ctx, phKey, ph); !apierrors.IsNotFound(err) && ph.DeletionTimestamp == nil {
		t.Errorf("the placeholder is still there after the companion took its room: %v", err)
	}
}

// upNode creates a KWOK node and waits until it takes pods.
func upNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := b.Node(name, "4", "8Gi", b.KWOK())
	create(t, env.Client, n)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return false, "", err
		}
		return len(n.Spec.Taints) == 0, fmt.Sprintf("taints %v", n.Spec.Taints), nil
	})
	return n
}
