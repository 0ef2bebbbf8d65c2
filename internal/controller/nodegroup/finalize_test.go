package nodegroup_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/cloudprovider/multi"
	"github.com/berth-dev/berth/internal/controller/nodegroup"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/capitest"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestDeletingANodeGroup: a NodeGroup gets a finalizer; deleted with
// deletionPolicy Drain it stays while a node it launched exists and goes
// once the node is gone; deleted with Orphan it goes at once and its node
// stays, without berth's owner mark, drain taint or standby marks.
func TestDeletingANodeGroup(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	r := &nodegroup.Reconciler{Client: env.Client, Failures: state.NewOfferings(clk, time.Minute), Clock: clk, Recorder: &fakes.Recorder{}}
	reconcileGroup := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, policy := range []v1alpha1.DeletionPolicy{v1alpha1.DeletionDrain, v1alpha1.DeletionOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			name := "delete-" + strings.ToLower(string(policy))
			ng := b.NodeGroup(name, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
			ng.Spec.DeletionPolicy = policy
			if err := env.Client.Create(ctx, ng); err != nil {
				t.Fatal(err)
			}
			node := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, name+"-a")
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: v1alpha1.TaintStandby, Value: "true", Effect: corev1.TaintEffectNoSchedule}) // a standby node too
			node.Labels[v1alpha1.TaintStandby] = "true"
			node.Annotations[v1alpha1.AnnotationStandbyFor] = "web"
			if err := env.Client.Create(ctx, node); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
			reconcileGroup(name)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), ng); err != nil || !controllerutil.ContainsFinalizer(ng, v1alpha1.FinalizerNodes) {
				t.Fatalf("node group after a reconcile: %v, finalizers %v; want %s", err, ng.Finalizers, v1alpha1.FinalizerNodes)
			}
			if err := env.Client.Delete(ctx, ng); err != nil {
				t.Fatal(err)
			}
			reconcileGroup(name)
			gone := apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{}))
			if policy == v1alpha1.DeletionOrphan {
				if !gone {
					t.Fatal("an Orphan node group is still there after its deletion")
				}
				n := &corev1.Node{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
					t.Fatalf("the orphaned node: %v, want it kept", err)
				}
				drained := false
				for _, taint := range n.Spec.Taints {
					drained = drained || taint.Key == v1alpha1.TaintDisrupted
				}
				if n.Annotations[v1alpha1.AnnotationLaunchedBy] != "" || drained || nodeutil.Standby(n) || n.Annotations[v1alpha1.AnnotationStandbyFor] != "" {
					t.Errorf("the orphaned node keeps berth's marks: annotations %v taints %v", n.Annotations, n.Spec.Taints)
				}
				return
			}
			if gone {
				t.Fatal("a Drain node group went while its node is still there")
			}
			if err := env.Client.Delete(ctx, node); err != nil {
				t.Fatal(err)
			}
			reconcileGroup(name)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Drain node group after its last node went: %v, want it gone", err)
			}
		})
	}
}

// TestAnOrphanGroupWaitsForANodeWhoseRemovalWasAccepted: a node group is
// deleted with deletionPolicy Orphan while the provider already accepted
// removing one of its drained nodes. That node is going: berth leaves it
// tainted (untainted, it would take pods that die with it) and the group
// waits for it, as for a drain.
func TestAnOrphanGroupWaitsForANodeWhoseRemovalWasAccepted(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	r := &nodegroup.Reconciler{Client: env.Client, Failures: state.NewOfferings(clk, time.Minute), Clock: clk, Recorder: &fakes.Recorder{}}
	ng := b.NodeGroup("orphan-going", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.DeletionPolicy = v1alpha1.DeletionOrphan
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	node := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, "orphan-going-a")
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	node.Annotations[v1alpha1.AnnotationRemovalAccepted] = clk.Now().UTC().Format(time.RFC3339)
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	reconcileGroup := func() { reconcileGroupOnce(t, r, ng) }
	reconcileGroup()
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	reconcileGroup()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{}); err != nil {
		t.Fatalf("the group while its node's removal is under way: %v, want it waiting", err)
	}
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
		t.Fatal(err)
	}
	if n.Annotations[v1alpha1.AnnotationLaunchedBy] == "" || !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintDisrupted }) {
		t.Errorf("the node being removed lost berth's marks: annotations %v taints %v", n.Annotations, n.Spec.Taints)
	}
	if err := env.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	reconcileGroup()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{}); !apierrors.IsNotFound(err) {
		t.Errorf("the group after its last node went: %v, want it gone", err)
	}
}

// heldRemovals holds a removal half-done for each node named (a Cluster
// API Machine marked while its replicas wait); those in committed went
// too far to undo.
type heldRemovals struct {
	held      map[string]bool
	committed map[string]bool
	cancelled []string
}

func (c *heldRemovals) CancelRemoval(_ context.Context, name string) error {
	if c.committed[name] {
		return &cloudprovider.RemovalCommittedError{Name: name, Message: "the replicas were lowered for it"}
	}
	if c.held[name] {
		c.cancelled = append(c.cancelled, name)
		delete(c.held, name)
	}
	return nil
}

func (c *heldRemovals) Removing(context.Context, *v1alpha1.NodeGroup) ([]string, error) {
	return nil, nil
}

// TestAnOrphanGroupUndoesTheRemovalsItsProviderHolds: a group is deleted
// with deletionPolicy Orphan while its provider holds two removals
// half-done. The one that can be undone is undone before its node is
// orphaned (left, a later removal in the same Cluster API object would
// take the orphaned node with it); the node whose removal went too far
// keeps berth's marks and the group waits for it, as for an accepted
// removal.
func TestAnOrphanGroupUndoesTheRemovalsItsProviderHolds(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	rc := &heldRemovals{held: map[string]bool{"orphan-held-a": true}, committed: map[string]bool{"orphan-held-b": true}}
	r := &nodegroup.Reconciler{Client: env.Client, Failures: state.NewOfferings(clk, time.Minute), Clock: clk, Recorder: &fakes.Recorder{}, Removals: rc}
	ng := b.NodeGroup("orphan-held", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.DeletionPolicy = v1alpha1.DeletionOrphan
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	var nodes []*corev1.Node
	for _, name := range []string{"orphan-held-a", "orphan-held-b"} {
		node := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, name)
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
		if err := env.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
		nodes = append(nodes, node)
	}
	reconcileGroup := func() { reconcileGroupOnce(t, r, ng) }
	reconcileGroup()
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	reconcileGroup()
	if !slices.Equal(rc.cancelled, []string{"orphan-held-a"}) {
		t.Errorf("removals undone %v, want orphan-held-a's", rc.cancelled)
	}
	marks := func(name string) bool {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		return n.Annotations[v1alpha1.AnnotationLaunchedBy] != ""
	}
	if marks("orphan-held-a") {
		t.Error("orphan-held-a, its removal undone, still carries berth's owner mark; want it orphaned")
	}
	if !marks("orphan-held-b") {
		t.Error("orphan-held-b, its removal too far to undo, lost berth's owner mark; want it kept, going")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{}); err != nil {
		t.Errorf("the group while a node's removal cannot be undone: %v, want it waiting", err)
	}
	if err := env.Client.Delete(ctx, nodes[1]); err != nil {
		t.Fatal(err)
	}
	reconcileGroup()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{}); !apierrors.IsNotFound(err) {
		t.Errorf("the group after the going node went: %v, want it gone", err)
	}
}

// reconcileGroupOnce runs one reconcile of the node group, which must not
// fail.
func reconcileGroupOnce(t *testing.T, r *nodegroup.Reconciler, ng *v1alpha1.NodeGroup) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ng)}); err != nil {
		t.Fatal(err)
	}
}

// TestADrainedGroupWaitsForItsMachinesStillBooting: a Cluster API group
// deleted with deletionPolicy Drain while a Machine berth launched for it
// boots (no Node yet) stays, and says so, while that Machine has no node
// of the group and while its adopted node is there, and goes once both
// are gone (the real Cluster API provider, over Cluster API's CRDs).
// Before, the group went with its last node and the booting Machine, and
// the replica berth added for it, were left to no one. A group whose
// provider is not enabled goes as before; one whose Machines cannot be
// listed waits, retrying, for the max provision time from its deletion,
// then goes with a warning.
func TestADrainedGroupWaitsForItsMachinesStillBooting(t *testing.T) {
	ctx := context.Background()
	capitest.InstallCRDs(t, env.Client)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &fakes.Recorder{}
	capi := clusterapi.New(env.Client, env.Client, clk)
	r := &nodegroup.Reconciler{Client: env.Client, Failures: state.NewOfferings(clk, time.Minute), Clock: clk, Recorder: rec, Unadopted: capi}
	exists := func(ng *v1alpha1.NodeGroup) bool {
		t.Helper()
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1alpha1.NodeGroup{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// group is a Cluster API group of its own MachineDeployment, with a
	// Machine berth launched for it, booting, made before the group is
	// deleted; it returns the group, deleted, and the Machine.
	group := func(name string) (*v1alpha1.NodeGroup, *unstructured.Unstructured) {
		t.Helper()
		md := capitest.MachineDeployment("default", name, 1, nil)
		ng := b.NodeGroup(name, b.Size(0, 10))
		ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: name}}
		for _, o := range []client.Object{md, ng} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
		reconcileGroupOnce(t, r, ng)
		m := capitest.Machine("default", name, name+"-m")
		m.SetAnnotations(map[string]string{v1alpha1.AnnotationLaunchedBy: string(ng.UID)})
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), m) })
		time.Sleep(1100 * time.Millisecond) // deleted a second after (timestamps count seconds)
		if err := env.Client.Delete(ctx, ng); err != nil {
			t.Fatal(err)
		}
		return ng, m
	}

	ng, m := group("drain-booting")
	reconcileGroupOnce(t, r, ng)
	if !exists(ng) {
		t.Fatal("the group went while a Machine launched for it boots, want it waiting")
	}
	if evs := rec.For("drain-booting"); !slices.ContainsFunc(evs, func(e fakes.Event) bool { return strings.Contains(e.Message, "1 machines still booting") }) {
		t.Errorf("events %v, want one saying the group waits for 1 machine still booting", evs)
	}
	// The Machine's node registers and is adopted: the group waits for it
	// as for any of its nodes.
	node := b.Node("drain-booting-m", "4", "8Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "drain-booting"))
	node.Annotations = map[string]string{v1alpha1.AnnotationLaunchedBy: string(ng.UID)}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	if err := unstructured.SetNestedField(m.Object, map[string]any{"nodeRef": map[string]any{"name": node.Name}}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	reconcileGroupOnce(t, r, ng)
	if !exists(ng) {
		t.Fatal("the group went while its adopted node is there, want it waiting")
	}
	// Scale-down removed the node and Cluster API its Machine.
	for _, o := range []client.Object{node, m} {
		if err := env.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	reconcileGroupOnce(t, r, ng)
	if exists(ng) {
		t.Error("the group is still there once its node and Machine are gone")
	}

	// Without --clusterapi: nothing of the group can be seen.
	r.Unadopted = multi.New(env.Client, kwok.New(env.Client, clk), nil)
	ng, _ = group("drain-not-enabled")
	reconcileGroupOnce(t, r, ng)
	if exists(ng) {
		t.Error("a group whose provider is not enabled is still there after its deletion, want it gone")
	}

	// A management cluster that does not answer for Machines.
	unanswering := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if u, ok := l.(*unstructured.UnstructuredList); ok && u.GetKind() == "MachineList" {
				return errors.New("the management cluster does not answer")
			}
			return c.List(ctx, l, opts...)
		}})
	r.Unadopted = clusterapi.New(env.Client, unanswering, clk)
	ng, _ = group("drain-unlisted")
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ng)}); err == nil || !exists(ng) {
		t.Fatalf("reconcile while its Machines cannot be listed = %v, group there %v; want an error and the group waiting", err, exists(ng))
	}
	clk.Step(16 * time.Minute) // past the default max provision time since the deletion
	reconcileGroupOnce(t, r, ng)
	if exists(ng) {
		t.Error("the group is still there 16 minutes after its deletion with its Machines unlisted, want it gone")
	}
	if evs := rec.For("drain-unlisted"); !slices.ContainsFunc(evs, func(e fakes.Event) bool { return e.Reason == nodegroup.ReasonUnadoptedUnknown }) {
		t.Errorf("events %v, want a %s warning", evs, nodegroup.ReasonUnadoptedUnknown)
	}
}
