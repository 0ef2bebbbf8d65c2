package standby_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/controller/capacitybuffer"
	"github.com/berth-dev/berth/internal/controller/standby"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestAStandbyCapacityBufferIsKeptOnStandbyNodes: a CapacityBuffer with
// provisioningStrategy buffer.x-k8s.io/standby-capacity of 3 chunks of 1
// cpu whose template selects zone-b gets two 2-cpu standby nodes in
// zone-b (zone-a is cheaper, but its chunks could not run there), no
// running units, and a Provisioning condition that says so (its
// containers set limits alone: they request them); handed to another
// autoscaler's strategy, or deleted, its standby nodes go.
func TestAStandbyCapacityBufferIsKeptOnStandbyNodes(t *testing.T) {
	ctx := context.Background()
	const group = "standby-buffer"
	ng := b.NodeGroup(group, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.08"), b.OnDemand("zone-b", "0.10")))
	pod := b.Pod("chunk", b.NodeSelector(v1alpha1.LabelZone, "zone-b"))
	// Limits alone: the chunk requests them as the API server admits it.
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: apiresource.MustParse("1"), corev1.ResourceMemory: apiresource.MustParse("1Gi")}}
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "standby-chunk", Namespace: "default"}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
	strategy := cbv1beta1.StrategyStandbyCapacity
	three := int32(3)
	cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "standby-chunks", Namespace: "default"},
		Spec: cbv1beta1.CapacityBufferSpec{ProvisioningStrategy: &strategy, PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: pt.Name}, Replicas: &three}}
	for _, o := range []client.Object{ng, pt, cb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{cb, pt, ng} {
			_ = env.Client.Delete(ctx, o)
		}
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: group})
	})
	standbys := state.NewStandby()
	buffers := &capacitybuffer.Reconciler{Client: env.Client, PodReader: env.Client, Ready: state.NewReadiness(), Standby: standbys, Recorder: &fakes.Recorder{}}
	key := types.NamespacedName{Namespace: "default", Name: cb.Name}
	translate := func() *cbv1beta1.CapacityBuffer {
		t.Helper()
		if _, err := buffers.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		got := &cbv1beta1.CapacityBuffer{}
		if err := env.Client.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := translate()
	if !meta.IsStatusConditionTrue(got.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) || got.Status.Replicas == nil || *got.Status.Replicas != 3 {
		t.Fatalf("a standby buffer is not translated: %+v", got.Status)
	}
	groups := []*v1alpha1.NodeGroup{ng}
	sets, err := clusterread.Units(ctx, env.Client, groups)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if s.Key == state.BufferKey("default", cb.Name) {
			t.Error("a standby buffer's chunks are planned as running units too")
		}
	}

	r := &standby.Reconciler{Client: env.Client, APIReader: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}),
		Offerings: state.NewOfferings(clock.RealClock{}, time.Minute), Standby: standbys, Recorder: &fakes.Recorder{}, Clock: clock.RealClock{}}
	f := &fixture{t: t, group: group, r: r}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	nodes := f.nodes()
	if len(nodes) != 2 {
		t.Fatalf("%d standby nodes for 3 chunks of 1 cpu, want 2", len(nodes))
	}
	for _, n := range nodes {
		if !nodeutil.Standby(&n) || n.Labels[v1alpha1.LabelZone] != "zone-b" || n.Annotations[v1alpha1.AnnotationStandbyFor] != "default/"+cb.Name {
			t.Errorf("node %s: standby %v, zone %s, for %q; want standby in zone-b for default/%s",
				n.Name, nodeutil.Standby(&n), n.Labels[v1alpha1.LabelZone], n.Annotations[v1alpha1.AnnotationStandbyFor], cb.Name)
		}
	}
	got = translate()
	if c := meta.FindStatusCondition(got.Status.Conditions, cbv1beta1.ConditionProvisioning); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != capacitybuffer.ReasonStandbyMissing {
		t.Errorf("Provisioning condition while no standby node is counted %+v, want False/%s", c, capacitybuffer.ReasonStandbyMissing)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got = translate()
	if c := meta.FindStatusCondition(got.Status.Conditions, cbv1beta1.ConditionProvisioning); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != capacitybuffer.ReasonStandby {
		t.Errorf("Provisioning condition with 4 units on 2 standby nodes %+v, want True/%s", c, capacitybuffer.ReasonStandby)
	}

	// Handed to another autoscaler's strategy: berth leaves its status as
	// it was, and keeps no standby node for it any more.
	other := "example.com/other"
	got.Spec.ProvisioningStrategy = &other
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	translate()
	for range 3 {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.nodes()); n != 0 {
		t.Errorf("%d standby nodes left after the buffer went to another strategy, want 0", n)
	}
	got = translate()
	got.Spec.ProvisioningStrategy = &strategy
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	translate()
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.nodes()); n != 2 {
		t.Fatalf("%d standby nodes once the buffer is standby again, want 2", n)
	}

	if err := env.Client.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.nodes()); n != 0 {
		t.Errorf("%d standby nodes left after the buffer was deleted, want 0", n)
	}
}
