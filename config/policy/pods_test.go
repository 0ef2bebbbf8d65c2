package policy_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// userGate is a scheduling gate that is not berth's.
const userGate = "example.com/quota"

// gatedWorkload creates, as the admin, a pending workload held back by
// berth's companion gate and a gate of someone else's, with labels and
// annotations of its own.
func gatedWorkload(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.Labels("app", name))
	p.Spec.Containers[0].Image = "registry.example/web:1"
	p.Annotations = map[string]string{"team": "shop"}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}, {Name: userGate}}
	create(t, env.Client, p)
	return p
}

// podChange is one write of berth's to a pod: change modifies a fresh copy
// of it, which is patched (JSON merge patch, as berth patches) through
// the pod or its status.
type podChange struct {
	name   string
	status bool
	change func(p *corev1.Pod)
}

func (c podChange) apply(ctx context.Context, cl client.Client, key client.ObjectKey) error {
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, key, p); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Labels, p.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
	c.change(p)
	if c.status {
		return cl.Status().Patch(ctx, p, patch)
	}
	return cl.Patch(ctx, p, patch)
}

// TestBerthChangesOnlyItsPartOfPods: berth's service account may patch
// any pod (RBAC), but the admission policy lets it write only what berth
// writes: its berth.dev/ labels and annotations, the removal of its own
// scheduling gate, and a nomination. A stolen token cannot change a pod's
// image (and so run code as the pod's service account), nor anything
// else of a pod, through the pod or its status.
func TestBerthChangesOnlyItsPartOfPods(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	namespace(t, "shop")
	w := gatedWorkload(t, "shop", "web")
	key := client.ObjectKeyFromObject(w)

	for _, c := range []podChange{
		{name: "change the image", change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example/miner:1" }},
		{name: "add a toleration", change: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}},
		{name: "narrow a gated pod's node selector", change: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }},
		{name: "set an active deadline", change: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }},
		{name: "remove someone else's scheduling gate", change: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == userGate })
		}},
		{name: "change a label that is not berth's", change: func(p *corev1.Pod) { p.Labels["app"] = "other" }},
		{name: "add a label that is not berth's", change: func(p *corev1.Pod) { p.Labels["exposed"] = "true" }},
		{name: "remove an annotation that is not berth's", change: func(p *corev1.Pod) { delete(p.Annotations, "team") }},
		{name: "add a finalizer", change: func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, "example.com/hold") }},
		{name: "change a label through the status", status: true, change: func(p *corev1.Pod) { p.Labels["app"] = "other" }},
		{name: "add a condition through the status", status: true, change: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/Ready", Status: corev1.ConditionTrue})
		}},
	} {
		if err := c.apply(ctx, berth, key); !deniedBy(err, podPolicy) {
			t.Errorf("berth's account could %s: %v, want refused by %s", c.name, err, podPolicy)
		}
	}

	// What berth writes, in the order of a workload's life: the companion
	// controller annotates it, the provisioning round nominates it, a
	// companion takes a placeholder's room, the gate goes.
	for _, c := range []podChange{
		{name: "write the companion's share key and size", change: func(p *corev1.Pod) {
			p.Labels[v1alpha1.LabelCompanionShareKey] = "key"
			p.Labels[v1alpha1.LabelCompanionFor] = string(p.UID)
			p.Annotations[v1alpha1.AnnotationCompanionRequests] = `{"cpu":"500m"}`
		}},
		{name: "nominate a node", status: true, change: func(p *corev1.Pod) { p.Status.NominatedNodeName = "node-a" }},
		{name: "mark the room a companion took", change: func(p *corev1.Pod) {
			p.Annotations["berth.dev/took-companion-room"] = "companion-x/uid"
		}},
		{name: "remove its own scheduling gate", change: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
				return g.Name == v1alpha1.SchedulingGateCompanion
			})
		}},
	} {
		if err := c.apply(ctx, berth, key); err != nil {
			t.Errorf("berth's account could not %s: %v", c.name, err)
		}
	}
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if gates := got.Spec.SchedulingGates; len(gates) != 1 || gates[0].Name != userGate {
		t.Errorf("scheduling gates %v, want only %s left", gates, userGate)
	}
	if got.Status.NominatedNodeName != "node-a" || got.Labels[v1alpha1.LabelCompanionShareKey] != "key" {
		t.Errorf("nomination %q, labels %v: berth's writes are missing", got.Status.NominatedNodeName, got.Labels)
	}

	// The policy binds berth's account only.
	image := podChange{change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example/web:2" }}
	if err := image.apply(ctx, env.Client, key); err != nil {
		t.Errorf("the admin could not change the image: %v", err)
	}
}
