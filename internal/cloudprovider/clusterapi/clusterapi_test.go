package clusterapi_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/capitest"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

// These tests run the provider against a real API server with Cluster
// API's CRDs (the real scale subresource and optimistic concurrency) but
// no Cluster API controller: they check what berth writes, and play
// Cluster API's part by hand where needed. The end-to-end test
// (test/e2e/clusterapi_test.go) runs the real controllers.

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const ns = "default"

// installCRDs installs Cluster API core's CRDs (from its Go module):
// Machine, MachineDeployment and MachineSet.
func installCRDs(t *testing.T) { capitest.InstallCRDs(t, env.Client) }

func capiObj(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return capitest.Object(kind, ns, name, spec)
}

// fixture is a MachineDeployment with machines (each with a node of the
// group, owner-marked) and its NodeGroup.
type fixture struct {
	ng       *v1alpha1.NodeGroup
	md       string
	provider *clusterapi.Provider
	clock    *clocktesting.FakeClock
}

func newFixture(t *testing.T, md string, replicas int64, annotations map[string]string, machines ...string) *fixture {
	t.Helper()
	installCRDs(t)
	ctx := context.Background()
	d := capitest.MachineDeployment(ns, md, replicas, annotations)
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	ng := b.NodeGroup(md, b.Size(0, 10))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: md}}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, ng)
		_ = env.Client.Delete(ctx, d)
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: md})
		_ = env.Client.DeleteAllOf(ctx, capiObj("Machine", "", nil), client.InNamespace(ns), client.MatchingLabels{"cluster.x-k8s.io/deployment-name": md})
	})
	for _, name := range machines {
		addMachine(t, ng, md, name, true)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	provider := clusterapi.New(env.Client, env.Client, clk)
	provider.MachineWait = -1 // no MachineSet controller makes Machines here
	return &fixture{ng: ng, md: md, clock: clk, provider: provider}
}

// addMachine creates a Machine of the deployment and, with a provider ID,
// its node labelled and owner-marked as nodeadoption does.
func addMachine(t *testing.T, ng *v1alpha1.NodeGroup, md, name string, withNode bool) {
	t.Helper()
	ctx := context.Background()
	spec := map[string]any{"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "x"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "M", "name": name}}
	if withNode {
		spec["providerID"] = "test:///" + name
	}
	m := capiObj("Machine", name, spec)
	m.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/deployment-name": md})
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if !withNode {
		return
	}
	node := b.Node(name, "4", "8Gi")
	node.Labels[v1alpha1.LabelNodeGroup] = ng.Name
	node.Annotations = map[string]string{v1alpha1.AnnotationLaunchedBy: string(ng.UID)}
	node.Spec.ProviderID = "test://" + name // fewer slashes than the Machine's: still the same machine
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) replicas(t *testing.T) int64 {
	t.Helper()
	d := capiObj("MachineDeployment", f.md, nil)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	return r
}

func machineAnnotations(t *testing.T, name string) map[string]string {
	t.Helper()
	m := capiObj("Machine", name, nil)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	return m.GetAnnotations()
}

// TestDeleteMarksExactlyTheChosenMachineThenLowersReplicasOnce: deleting a
// node marks only its Machine, lowers replicas by one, and doing it again
// (a restart after both steps) lowers nothing more.
func TestDeleteMarksExactlyTheChosenMachineThenLowersReplicasOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "del-once", 3, nil, "del-once-a", "del-once-b", "del-once-c")
	for range 2 {
		if err := f.provider.Delete(ctx, "del-once-b"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.replicas(t); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	for _, name := range []string{"del-once-a", "del-once-b", "del-once-c"} {
		_, marked := machineAnnotations(t, name)[clusterapi.AnnotationDeleteMachine]
		if marked != (name == "del-once-b") {
			t.Errorf("machine %s marked = %v", name, marked)
		}
	}
	if got := machineAnnotations(t, "del-once-b")[v1alpha1.AnnotationDeleteRequestedBy]; got != string(f.ng.UID) {
		t.Errorf("berth's mark = %q, want the group's UID", got)
	}
}

// TestDeleteAfterARestartBetweenMarkAndLower: the Machine is marked (the
// replica that marked it died before lowering replicas); the next Delete
// lowers by one, not two.
func TestDeleteAfterARestartBetweenMarkAndLower(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "restart", 2, nil, "restart-a", "restart-b")
	m := capiObj("Machine", "restart-a", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	m.SetAnnotations(map[string]string{clusterapi.AnnotationDeleteMachine: "earlier", v1alpha1.AnnotationDeleteRequestedBy: string(f.ng.UID)})
	if err := env.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := f.provider.Delete(ctx, "restart-a"); err != nil {
		t.Fatal(err)
	}
	if got := f.replicas(t); got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
}

// TestDeleteRefusesWhileAnotherMachineCarriesAForeignDeleteMark: someone
// else's delete-machine mark could make Cluster API delete that Machine
// instead of berth's: berth marks its own but does not lower replicas.
func TestDeleteRefusesWhileAnotherMachineCarriesAForeignDeleteMark(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "foreign", 2, nil, "foreign-a", "foreign-b")
	m := capiObj("Machine", "foreign-a", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	m.SetAnnotations(map[string]string{clusterapi.AnnotationDeleteMachine: "by-hand"})
	if err := env.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	err := f.provider.Delete(ctx, "foreign-b")
	if err == nil || !strings.Contains(err.Error(), "not set by berth") {
		t.Fatalf("Delete = %v, want a refusal naming the foreign mark", err)
	}
	if got := f.replicas(t); got != 2 {
		t.Errorf("replicas = %d, want 2 (unchanged)", got)
	}
}

// TestDeleteWaitsForAMachineStillToBeCreated: the deployment asks for 3
// replicas and has 2 Machines (a scale-up the MachineSet has not acted on
// yet). Lowering to 2 now would leave the marked Machine and cancel the
// one to come: berth marks its Machine, keeps the replicas and says it
// waits; once the third Machine is there, the replicas go down by one.
func TestDeleteWaitsForAMachineStillToBeCreated(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "creating", 3, nil, "creating-a", "creating-b")
	err := f.provider.Delete(ctx, "creating-b")
	if err == nil || !strings.Contains(err.Error(), "waiting for Cluster API: 3 replicas but 2 live Machines") {
		t.Fatalf("Delete = %v, want it to wait for the Machine to be created", err)
	}
	if got := f.replicas(t); got != 3 {
		t.Errorf("replicas = %d while a Machine is still to be created, want 3 (unchanged)", got)
	}
	if _, marked := machineAnnotations(t, "creating-b")[clusterapi.AnnotationDeleteMachine]; !marked {
		t.Errorf("creating-b not marked: the mark comes first")
	}
	addMachine(t, f.ng, f.md, "creating-c", true)
	if err := f.provider.Delete(ctx, "creating-b"); err != nil {
		t.Fatal(err)
	}
	if got := f.replicas(t); got != 2 {
		t.Errorf("replicas = %d once the Machine is there, want 2", got)
	}
}

// TestAGroupWhoseMachinesCannotBeReadKeepsNoOtherGroupFromAdopting: a
// node group whose Machines berth may not list (the management cluster
// forbids its namespace) sorts first; the node of another group's Machine
// is still adopted by that group.
func TestAGroupWhoseMachinesCannotBeReadKeepsNoOtherGroupFromAdopting(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "adopt-ok", 1, nil, "adopt-ok-a")
	forbidding := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			lo := &client.ListOptions{}
			lo.ApplyOptions(opts)
			if lo.Namespace == "forbidden" {
				return apierrors.NewForbidden(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machines"}, "", errors.New("berth may not list machines here"))
			}
			return c.List(ctx, l, opts...)
		}})
	f.provider = clusterapi.New(env.Client, forbidding, f.clock)
	broken := b.NodeGroup("aaa-broken", b.Size(0, 10))
	broken.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "forbidden", Name: "md"}}
	if err := env.Client.Create(ctx, broken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), broken) })
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "adopt-ok-a"}, node); err != nil {
		t.Fatal(err)
	}
	ng, err := f.provider.Adopt(ctx, node)
	if err != nil || ng == nil || ng.Name != f.ng.Name {
		t.Fatalf("Adopt = %v, %v; want group %s and no error", ng, err, f.ng.Name)
	}
	stranger := node.DeepCopy()
	stranger.Spec.ProviderID = "test:///nobody"
	if ng, err := f.provider.Adopt(ctx, stranger); ng != nil || err == nil || !strings.Contains(err.Error(), "node group aaa-broken") {
		t.Errorf("Adopt of a node no group owns = %v, %v; want no group and the broken group's error (it might own it)", ng, err)
	}
}

// TestDeleteLeavesANodeWithoutTheOwnerMark: a node labelled with the group
// by hand, without berth's owner mark, is not removed.
func TestDeleteLeavesANodeWithoutTheOwnerMark(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "unmarked", 1, nil, "unmarked-a")
	node := &corev1.Node{}
	node.Name = "unmarked-a"
	unmark := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1alpha1.AnnotationLaunchedBy+`":null}}}`))
	if err := env.Client.Patch(ctx, node, unmark); err != nil {
		t.Fatal(err)
	}
	if err := f.provider.Delete(ctx, "unmarked-a"); err == nil {
		t.Fatal("Delete of a node without the owner mark succeeded")
	}
	if _, marked := machineAnnotations(t, "unmarked-a")[clusterapi.AnnotationDeleteMachine]; marked || f.replicas(t) != 1 {
		t.Errorf("machine marked %v, replicas %d: want untouched", marked, f.replicas(t))
	}
}

// TestCreateAddsAReplicaUpToTheAnnotatedMax: parallel launches each add
// one (conflicts are retried), and the annotated max is never exceeded.
func TestCreateAddsAReplicaUpToTheAnnotatedMax(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "create", 0, map[string]string{clusterapi.AnnotationMaxSize: "3"})
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off})
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.replicas(t); got != 3 {
		t.Fatalf("replicas = %d, want 3", got)
	}
	if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off}); err == nil {
		t.Fatal("Create beyond the annotated max size succeeded")
	}
}

// TestCreateFailsWithInsufficientCapacityWhenAMachineGotNoInfrastructure:
// a Machine without a provider ID past the machine timeout makes the
// launch fail with InsufficientCapacity, and berth removes that Machine.
func TestCreateFailsWithInsufficientCapacityWhenAMachineGotNoInfrastructure(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "stuck", 1, nil)
	addMachine(t, f.ng, "stuck", "stuck-a", false)
	f.clock.Step(11 * time.Minute)
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	_, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off})
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("Create = %v, want InsufficientCapacity", err)
	}
	if _, marked := machineAnnotations(t, "stuck-a")[clusterapi.AnnotationDeleteMachine]; !marked || f.replicas(t) != 0 {
		t.Errorf("stuck machine marked %v, replicas %d: want marked and 0", marked, f.replicas(t))
	}
}

// TestReplicasThatNeverBecomeMachinesStopTheGroupGrowing: a replica
// berth added that its MachineSet never makes a Machine for (preflight
// checks during a control-plane upgrade, a paused Cluster) stops further
// launches in the group once the machine timeout passed: the launch fails
// as InsufficientCapacity (the pods go elsewhere) and replicas stay. Once
// the Machines come, launches go on.
func TestReplicasThatNeverBecomeMachinesStopTheGroupGrowing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "unrealized", 1, nil, "unrealized-a")
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	create := func() error {
		_, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off})
		return err
	}
	if err := create(); err != nil { // 2 replicas, 1 Machine: the MachineSet makes none
		t.Fatal(err)
	}
	if err := f.provider.RefreshNodeGroup(ctx, f.ng.DeepCopy()); err != nil { // the next round sees them ahead
		t.Fatal(err)
	}
	f.clock.Step(5 * time.Minute)
	if err := create(); err != nil { // within the timeout: a launch may still come
		t.Fatalf("Create within the machine timeout = %v, want a replica added", err)
	}
	f.clock.Step(6 * time.Minute)
	err := create()
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("Create 11 minutes after a replica made no Machine = %v, want InsufficientCapacity", err)
	}
	if got := f.replicas(t); got != 3 {
		t.Fatalf("replicas = %d after the refused launch, want 3 (no more added)", got)
	}
	addMachine(t, f.ng, "unrealized", "unrealized-b", true)
	addMachine(t, f.ng, "unrealized", "unrealized-c", true)
	if err := create(); err != nil {
		t.Fatalf("Create once every replica has its Machine = %v, want a replica added", err)
	}
	if got := f.replicas(t); got != 4 {
		t.Errorf("replicas = %d, want 4", got)
	}
}

// TestAMachineBeingDeletedIsNoReplicaAhead: 2 replicas, 2 Machines, one
// of them being deleted (a remediation's drain that takes long): the
// MachineSet counts it and makes its replacement once it is gone. The
// group's replicas are not ahead of its Machines, and launches go on past
// the machine timeout; a round's refresh that sees them not ahead forgets
// an earlier time.
func TestAMachineBeingDeletedIsNoReplicaAhead(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "deleting", 2, nil, "deleting-a")
	addMachine(t, f.ng, "deleting", "deleting-b", true)
	m := capiObj("Machine", "deleting-b", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	m.SetFinalizers([]string{"test.berth.dev/hold"})
	if err := env.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err == nil {
			m.SetFinalizers(nil)
			_ = env.Client.Update(ctx, m)
		}
	})
	for range 3 {
		if err := f.provider.RefreshNodeGroup(ctx, f.ng.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(5 * time.Minute)
	}
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off}); err != nil {
		t.Errorf("Create beside a Machine being deleted, 15 minutes on = %v, want a replica added", err)
	}
}

// TestRefreshAppliesTheAnnotations: the planner's copy of the group gets
// the annotated bounds and scale-from-zero capacity.
func TestRefreshAppliesTheAnnotations(t *testing.T) {
	f := newFixture(t, "refresh", 0, map[string]string{clusterapi.AnnotationMaxSize: "4", clusterapi.AnnotationCPU: "16", clusterapi.AnnotationMemory: "64Gi"})
	ng := f.ng.DeepCopy()
	if failed := cloudprovider.Refresh(context.Background(), f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
		t.Fatal(failed)
	}
	cpu := ng.Spec.InstanceTypes[0].Capacity[corev1.ResourceCPU]
	if ng.Spec.MaxSize != 4 || cpu.String() != "16" {
		t.Errorf("maxSize %d cpu %s, want 4 and 16", ng.Spec.MaxSize, cpu.String())
	}
}

// TestRefreshedGroupKeepsItsNodesUndrifted: the annotations' labels and
// taints describe the planner's copy of the group, but a node adopted
// with the stored group's launch hash has not drifted for that (the
// Cluster API end-to-end test once saw berth replace every adopted node).
func TestRefreshedGroupKeepsItsNodesUndrifted(t *testing.T) {
	f := newFixture(t, "pinned", 0, map[string]string{clusterapi.AnnotationLabels: "infra.example/pool=a", clusterapi.AnnotationTaints: "infra.example/ded=x:NoSchedule"})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pinned-a", Annotations: map[string]string{v1alpha1.AnnotationLaunchHash: f.ng.LaunchHash()},
		Labels: map[string]string{v1alpha1.LabelInstanceType: f.ng.Spec.InstanceTypes[0].Name, v1alpha1.LabelZone: f.ng.Spec.InstanceTypes[0].Offerings[0].Zone,
			v1alpha1.LabelCapacityType: string(f.ng.Spec.InstanceTypes[0].Offerings[0].CapacityType)}}}
	ng := f.ng.DeepCopy()
	if failed := cloudprovider.Refresh(context.Background(), f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
		t.Fatal(failed)
	}
	if ng.Spec.Template.Labels["infra.example/pool"] != "a" || len(ng.Spec.Template.Taints) == 0 {
		t.Fatalf("refreshed template %+v, want the annotated label and taint", ng.Spec.Template)
	}
	if v := lifecycle.Drifted(ng, node); v != nil {
		t.Errorf("an adopted node of the refreshed group: %s, want not drifted", v.Message)
	}
	stored := f.ng.DeepCopy()
	stored.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"changed": "by-the-user"}
	if v := lifecycle.Drifted(stored, node); v == nil {
		t.Error("a node of a group whose template the user changed: not drifted, want drifted")
	}
}

// TestPendingListsMachinesStillBooting: Machines without a Node are
// launching nodes until the machine timeout; a Machine with a Node, or
// without infrastructure past the timeout, is not.
func TestPendingListsMachinesStillBooting(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "pending", 2, nil, "pending-joined")
	addMachine(t, f.ng, "pending", "pending-booting", false)
	m := capiObj("Machine", "pending-joined", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(m.Object, "pending-joined", "status", "nodeRef", "name")
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := f.provider.Pending(ctx, f.ng)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].NodeName != "pending-booting" || got[0].Offering.InstanceType != "standard-2" || got[0].GivenUp {
		t.Fatalf("pending = %+v, want only pending-booting of standard-2, not given up", got)
	}
	f.clock.Step(11 * time.Minute)
	if got, err := f.provider.Pending(ctx, f.ng); err != nil || len(got) != 1 || !got[0].GivenUp {
		t.Fatalf("pending past the machine timeout = %+v, %v; want pending-booting given up", got, err)
	}
}

// TestAMachineItsInfrastructureFailedIsGivenUpAtOnce: a Machine whose
// infrastructure provider failed it for good (v1beta1's failureReason and
// failureMessage, kept under status.deprecated.v1beta1 in v1beta2) will
// get no Node: it is no launching node as soon as it failed, not only
// after the machine timeout (10 minutes), and the next launch in the group
// removes it and reports the offering out of capacity with the failure.
func TestAMachineItsInfrastructureFailedIsGivenUpAtOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "failed", 1, nil)
	addMachine(t, f.ng, "failed", "failed-0", false)
	m := capiObj("Machine", "failed-0", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(m.Object, "InsufficientCapacity", "status", "deprecated", "v1beta1", "failureReason")
	_ = unstructured.SetNestedField(m.Object, "no m5.large capacity in us-east-1a", "status", "deprecated", "v1beta1", "failureMessage")
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := f.provider.Pending(ctx, f.ng)
	if err != nil || len(got) != 1 || !got[0].GivenUp {
		t.Fatalf("pending = %+v, %v; want failed-0 given up at once", got, err)
	}
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	_, err = f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off})
	if !cloudprovider.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "no m5.large capacity") {
		t.Fatalf("launch beside the failed machine: %v, want insufficient capacity naming the failure", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	if _, marked := m.GetAnnotations()[clusterapi.AnnotationDeleteMachine]; !marked && m.GetDeletionTimestamp() == nil {
		t.Errorf("the failed machine is neither marked for deletion nor deleted: %v", m.GetAnnotations())
	}
}

// TestCancelRemovalAfterAFailedReplicaChange: the replica change after the
// mark failed (a foreign delete mark made berth refuse to lower); the
// removal is given up and cancelled: berth's mark is gone, and a later
// removal in the same MachineDeployment lowers the replicas by one, not
// two.
func TestCancelRemovalAfterAFailedReplicaChange(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "cancel", 3, nil, "cancel-a", "cancel-b", "cancel-c")
	foreign := capiObj("Machine", "cancel-c", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatal(err)
	}
	foreign.SetAnnotations(map[string]string{clusterapi.AnnotationDeleteMachine: "by-hand"})
	if err := env.Client.Update(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := f.provider.Delete(ctx, "cancel-a"); err == nil {
		t.Fatal("Delete lowered the replicas next to a foreign delete mark")
	}
	if err := f.provider.CancelRemoval(ctx, "cancel-a"); err != nil {
		t.Fatalf("CancelRemoval = %v", err)
	}
	if a := machineAnnotations(t, "cancel-a"); a[clusterapi.AnnotationDeleteMachine] != "" || a[v1alpha1.AnnotationDeleteRequestedBy] != "" {
		t.Errorf("machine cancel-a still carries a delete mark after the cancel: %v", a)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatal(err)
	}
	foreign.SetAnnotations(nil)
	if err := env.Client.Update(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := f.provider.Delete(ctx, "cancel-b"); err != nil {
		t.Fatal(err)
	}
	if got := f.replicas(t); got != 2 {
		t.Errorf("replicas after the next removal = %d, want 2 (one Machine removed, not two)", got)
	}
	if removing, err := f.provider.Removing(ctx, f.ng); err != nil || len(removing) != 1 || removing[0] != "cancel-b" {
		t.Errorf("Removing = %v %v, want [cancel-b]", removing, err)
	}
	if err := f.provider.CancelRemoval(ctx, "cancel-b"); !cloudprovider.IsRemovalCommitted(err) {
		t.Errorf("CancelRemoval after the replicas were lowered = %v, want a committed removal", err)
	}
	if machineAnnotations(t, "cancel-b")[clusterapi.AnnotationDeleteMachine] == "" {
		t.Error("the mark of a committed removal was taken off: Cluster API would delete another Machine")
	}
}

// TestCancelRemovalLeavesADeleteMarkSomeoneElseSet: a Machine someone
// marked for deletion by hand is the one berth removes; the removal
// waits (another hand-set mark makes berth refuse to lower the replicas)
// and is cancelled. berth takes its own mark off and leaves the one that
// was there before it.
func TestCancelRemovalLeavesADeleteMarkSomeoneElseSet(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "kept", 3, nil, "kept-a", "kept-b", "kept-c")
	for _, name := range []string{"kept-a", "kept-c"} {
		m := capiObj("Machine", name, nil)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		m.SetAnnotations(map[string]string{clusterapi.AnnotationDeleteMachine: "by-hand"})
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.provider.Delete(ctx, "kept-a"); err == nil {
		t.Fatal("Delete lowered the replicas next to a foreign delete mark")
	}
	if a := machineAnnotations(t, "kept-a"); a[v1alpha1.AnnotationDeleteRequestedBy] == "" {
		t.Fatalf("machine kept-a not marked by berth: %v", a)
	}
	if err := f.provider.CancelRemoval(ctx, "kept-a"); err != nil {
		t.Fatalf("CancelRemoval = %v", err)
	}
	a := machineAnnotations(t, "kept-a")
	if a[clusterapi.AnnotationDeleteMachine] != "by-hand" || a[v1alpha1.AnnotationDeleteRequestedBy] != "" || a[v1alpha1.AnnotationDeleteMachineKept] != "" {
		t.Errorf("machine kept-a after the cancel: %v; want only the hand-set delete mark", a)
	}
}

// TestAMachineSetWithALongNameFindsItsMachines: Cluster API labels the
// Machines of a MachineSet whose name is longer than a label value with
// the name's hash (cluster.x-k8s.io/set-name: hash_eauoKg_z is what its
// labels/format.MustFormatValue, v1.14.2, gives for this name): berth
// lists them as the group's instances.
func TestAMachineSetWithALongNameFindsItsMachines(t *testing.T) {
	installCRDs(t)
	ctx := context.Background()
	long := "a-machine-set-whose-name-is-much-longer-than-a-label-value-may-be-0123456789"
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/set-name": "hash_eauoKg_z"}
	set := capiObj("MachineSet", long, map[string]any{
		"clusterName": "c", "replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
			"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "x"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "T", "name": "t"},
		}},
	})
	if err := env.Client.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	ng := b.NodeGroup("long-ms", b.Size(0, 10))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Kind: v1alpha1.ClusterAPIMachineSet, Namespace: ns, Name: long}}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	m := capiObj("Machine", "long-ms-0", map[string]any{"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "x"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "M", "name": "long-ms-0"}, "providerID": "test:///long-ms-0"})
	m.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/set-name": "hash_eauoKg_z"})
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, ng)
		_ = env.Client.Delete(ctx, set)
		_ = env.Client.Delete(ctx, m)
	})
	provider := clusterapi.New(env.Client, env.Client, clocktesting.NewFakeClock(time.Now()))
	got, err := provider.List(ctx, ng.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ProviderID != "test:///long-ms-0" {
		t.Fatalf("instances of the MachineSet %s: %+v, want its Machine long-ms-0", long, got)
	}
}

// TestAGroupWhoseRemovalsWouldBeRefusedIsPlannedWithoutRemovals: while a
// live Machine carries a delete-machine mark berth did not set, or the
// MachineDeployment rolls out (live Machines in two MachineSets), Delete
// refuses every removal; the refreshed group keeps at least its replicas
// (minSize 2), so scale-down drains none of its nodes for a removal that
// cannot happen, and launches go on (maxSize stays 10). Before, nodes
// were drained, the removal refused, and drained again after the
// cool-down, over and over.
func TestAGroupWhoseRemovalsWouldBeRefusedIsPlannedWithoutRemovals(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "refuse-hold", 2, nil, "refuse-hold-a", "refuse-hold-b")
	refreshed := func() *v1alpha1.NodeGroup {
		t.Helper()
		ng := f.ng.DeepCopy()
		if failed := cloudprovider.Refresh(ctx, f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
			t.Fatal(failed)
		}
		return ng
	}
	if ng := refreshed(); ng.Spec.MinSize != 0 {
		t.Fatalf("minSize %d with nothing refusing a removal, want the group's 0", ng.Spec.MinSize)
	}
	edit := func(name string, change func(*unstructured.Unstructured)) {
		t.Helper()
		m := capiObj("Machine", name, nil)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		change(m)
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	edit("refuse-hold-a", func(m *unstructured.Unstructured) {
		m.SetAnnotations(map[string]string{clusterapi.AnnotationDeleteMachine: "by-hand"})
	})
	if ng := refreshed(); ng.Spec.MinSize != 2 || ng.Spec.MaxSize != 10 {
		t.Errorf("with a foreign delete mark: minSize %d maxSize %d, want 2 (the replicas) and 10", ng.Spec.MinSize, ng.Spec.MaxSize)
	}
	edit("refuse-hold-a", func(m *unstructured.Unstructured) { m.SetAnnotations(nil) })
	for name, set := range map[string]string{"refuse-hold-a": "ms-old", "refuse-hold-b": "ms-new"} {
		edit(name, func(m *unstructured.Unstructured) {
			l := m.GetLabels()
			l["cluster.x-k8s.io/set-name"] = set
			m.SetLabels(l)
		})
	}
	if ng := refreshed(); ng.Spec.MinSize != 2 {
		t.Errorf("while rolling out: minSize %d, want 2 (the replicas)", ng.Spec.MinSize)
	}
}

// TestAnUndoDoesNotRaceARemovalOfTheSameObject: Machine race-a carries
// berth's mark from a removal whose replicas were never lowered (a drain
// given up), and its undo runs while another removal (race-b) marks its
// Machine and lowers the replicas. The undo read the replicas before they
// were lowered; its unmark is held until they are. Run together, the
// lowering counted race-a's mark and the undo then took it off: one
// replica lowered for no mark, and Cluster API would delete a Machine
// berth never drained. One at a time, every replica lowered keeps a mark.
func TestAnUndoDoesNotRaceARemovalOfTheSameObject(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "race", 3, nil, "race-a", "race-b", "race-c")
	a := capiObj("Machine", "race-a", nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	a.SetAnnotations(map[string]string{clusterapi.AnnotationDeleteMachine: "2026-01-01T00:00:00Z", v1alpha1.AnnotationDeleteRequestedBy: string(f.ng.UID)})
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	unmarking, scaled := make(chan struct{}), make(chan struct{})
	var once, scaledOnce sync.Once
	mgmt := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == "race-a" {
				once.Do(func() { close(unmarking) })
				select { // hold the unmark until the replicas are lowered (or 3 s)
				case <-scaled:
				case <-time.After(3 * time.Second):
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if err == nil {
				scaledOnce.Do(func() { close(scaled) })
			}
			return err
		}})
	f.provider = clusterapi.New(env.Client, mgmt, f.clock)
	undone := make(chan error, 1)
	go func() { undone <- f.provider.CancelRemoval(ctx, "race-a") }()
	select {
	case <-unmarking:
	case <-time.After(10 * time.Second):
		t.Fatal("the undo never came to its unmark")
	}
	removeErr := f.provider.Delete(ctx, "race-b")
	undoErr := <-undone
	live, marked := 0, 0
	for _, name := range []string{"race-a", "race-b", "race-c"} {
		live++
		if machineAnnotations(t, name)[v1alpha1.AnnotationDeleteRequestedBy] != "" {
			marked++
		}
	}
	if lowered := int64(live) - f.replicas(t); int64(marked) < lowered {
		t.Errorf("replicas %d for %d live Machines with %d of berth's marks (removal: %v, undo: %v): a replica lowered for no mark",
			f.replicas(t), live, marked, removeErr, undoErr)
	}
}

// TestTwoGroupsNamingOneObject: node group "shared" and "aa-shared" both
// name MachineDeployment shared; aa-shared (first by name) scales it.
// shared lists no booting Machine (each group listed it: the round planned
// the same node twice and failed for every group), removes and launches
// nothing, and its copy is held at the nodes labelled with it.
func TestTwoGroupsNamingOneObject(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "shared", 2, nil, "shared-a")
	addMachine(t, f.ng, "shared", "shared-b", false)
	first := b.NodeGroup("aa-shared", b.Size(0, 10))
	first.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: "shared"}}
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, first) })
	// No Machine here has a nodeRef (no Cluster API controller): both are pending.
	if got, err := f.provider.Pending(ctx, first); err != nil || len(got) != 2 {
		t.Fatalf("pending of aa-shared = %d, %v; want its 2 Machines", len(got), err)
	}
	if got, err := f.provider.Pending(ctx, f.ng); err != nil || len(got) != 0 {
		t.Fatalf("pending of shared = %v, %v; want none: aa-shared scales the MachineDeployment", got, err)
	}
	planned := f.ng.DeepCopy()
	if err := f.provider.RefreshNodeGroup(ctx, planned); err != nil {
		t.Fatal(err)
	}
	if planned.Spec.MinSize != 1 || planned.Spec.MaxSize != 1 {
		t.Errorf("shared planned with sizes %d-%d, want held at its 1 node", planned.Spec.MinSize, planned.Spec.MaxSize)
	}
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off}); err == nil || !strings.Contains(err.Error(), "aa-shared") {
		t.Errorf("Create in shared = %v, want refused naming aa-shared", err)
	}
	if err := f.provider.Delete(ctx, "shared-a"); err == nil {
		t.Error("Delete of shared's node succeeded, want refused: aa-shared scales the object")
	}
	if got := f.replicas(t); got != 2 {
		t.Errorf("replicas = %d, want 2 untouched", got)
	}
}

// TestOnlyTheMachinesOfBerthsLaunchesAreItsLaunches: the Machine a launch
// of berth's made carries the group's UID, and Get says its node is
// berth's launch; a Machine of the same MachineDeployment that a rollout
// or a hand-raised replica count made is not (the launch timeout leaves
// its node to Cluster API).
func TestOnlyTheMachinesOfBerthsLaunchesAreItsLaunches(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "stamp", 1, nil, "stamp-old")
	f.provider.MachineWait = 5 * time.Second
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	launched := make(chan *cloudprovider.Instance, 1)
	go func() {
		inst, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off})
		if err != nil {
			t.Error(err)
		}
		launched <- inst
	}()
	// The MachineSet's part: a Machine for the new replica.
	expect.Eventually(t, 10*time.Second, func(context.Context) (bool, string, error) {
		return f.replicas(t) == 2, "replicas not raised yet", nil
	})
	addMachine(t, f.ng, "stamp", "stamp-new", true)
	inst := <-launched
	if inst == nil || inst.NodeName != "stamp-new" {
		t.Fatalf("launch = %+v, want it named after Machine stamp-new", inst)
	}
	if got := machineAnnotations(t, "stamp-new")[v1alpha1.AnnotationLaunchedBy]; got != string(f.ng.UID) {
		t.Errorf("Machine stamp-new %s = %q, want the group's UID", v1alpha1.AnnotationLaunchedBy, got)
	}
	for name, want := range map[string]bool{"stamp-new": false, "stamp-old": true} {
		got, err := f.provider.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got.NotLaunched != want {
			t.Errorf("Get(%s).NotLaunched = %v, want %v", name, got.NotLaunched, want)
		}
	}
}

// TestAGroupDeletedWithDrainAdoptsItsBootingMachinesNode: a group being
// deleted with deletionPolicy Drain (held by its finalizer) waits for the
// Machine berth launched for it that was booting at the deletion
// (Unadopted names it until its node is adopted) and adopts that node
// when it registers, so that scale-down drains and removes it as the
// group's other nodes; before, no group adopted it and the Machine, and
// the replica berth added for it, were left to no one. A Machine berth
// did not launch (a rollout's) is neither waited for nor adopted; a live
// group naming the same object adopts, and the deleted one waits for
// nothing; a group deleted with Orphan adopts nothing.
func TestAGroupDeletedWithDrainAdoptsItsBootingMachinesNode(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []v1alpha1.DeletionPolicy{v1alpha1.DeletionDrain, v1alpha1.DeletionOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			md := "deleted-" + strings.ToLower(string(policy))
			f := newFixture(t, md, 3, nil, md+"-a")
			addMachine(t, f.ng, md, md+"-b", false)
			addMachine(t, f.ng, md, md+"-rollout", false)
			mb := capiObj("Machine", md+"-b", nil)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mb), mb); err != nil {
				t.Fatal(err)
			}
			mb.SetAnnotations(map[string]string{v1alpha1.AnnotationLaunchedBy: string(f.ng.UID)}) // berth's launch
			if err := env.Client.Update(ctx, mb); err != nil {
				t.Fatal(err)
			}
			f.ng.Spec.DeletionPolicy = policy
			f.ng.Finalizers = []string{v1alpha1.FinalizerNodes}
			if err := env.Client.Update(ctx, f.ng); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				f.ng.Finalizers = nil
				_ = env.Client.Update(context.Background(), f.ng)
			})
			time.Sleep(1100 * time.Millisecond) // the deletion a second after the Machines were made
			if err := env.Client.Delete(ctx, f.ng); err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.ng), f.ng); err != nil {
				t.Fatal(err)
			}
			waits, err := f.provider.Unadopted(ctx, f.ng, 15*time.Minute)
			if err != nil || !slices.Equal(waits, []string{md + "-b"}) {
				t.Fatalf("Unadopted = %v, %v; want berth's booting Machine %s-b alone", waits, err, md)
			}
			// The Machines boot: a provider ID, then a Node, unlabelled.
			boot := func(name string) *corev1.Node {
				t.Helper()
				m := capiObj("Machine", name, nil)
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
					t.Fatal(err)
				}
				if err := unstructured.SetNestedField(m.Object, "test:///"+name, "spec", "providerID"); err != nil {
					t.Fatal(err)
				}
				if err := env.Client.Update(ctx, m); err != nil {
					t.Fatal(err)
				}
				node := b.Node(name, "4", "8Gi")
				node.Spec.ProviderID = "test:///" + name
				if err := env.Client.Create(ctx, node); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
				return node
			}
			node, rollout := boot(md+"-b"), boot(md+"-rollout")
			ng, err := f.provider.Adopt(ctx, node)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case policy == v1alpha1.DeletionDrain && (ng == nil || ng.Name != md):
				t.Fatalf("Adopt = %v, want the group being drained away, %s", ng, md)
			case policy == v1alpha1.DeletionOrphan && ng != nil:
				t.Fatalf("Adopt = %s, want no group: one deleted with Orphan adopts nothing", ng.Name)
			}
			if ng, err := f.provider.Adopt(ctx, rollout); err != nil || ng != nil {
				t.Errorf("Adopt of a rollout's node = %v, %v; want no group", ng, err)
			}
			live := b.NodeGroup("zz-"+md, b.Size(0, 10))
			live.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: md}}
			if err := env.Client.Create(ctx, live); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), live) })
			if ng, err := f.provider.Adopt(ctx, node); err != nil || ng == nil || ng.Name != live.Name {
				t.Errorf("Adopt with a live group naming the object = %v, %v; want %s", ng, err, live.Name)
			}
			if waits, err := f.provider.Unadopted(ctx, f.ng, 15*time.Minute); err != nil || len(waits) != 0 {
				t.Errorf("Unadopted with a live group naming the object = %v, %v; want none", waits, err)
			}
		})
	}
}

// TestUnadoptedNamesBerthsMachinesUntilTheirNodeIsTheGroups: the Machines
// berth launched for a group are named while they have no Node, and while
// their Node lacks the group's owner mark (registered, not adopted yet),
// not once it has it, nor once they are older than maxWait.
func TestUnadoptedNamesBerthsMachinesUntilTheirNodeIsTheGroups(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "unadopted", 1, nil)
	addMachine(t, f.ng, "unadopted", "unadopted-a", true) // its node owner-marked: adopted
	for _, name := range []string{"unadopted-a"} {
		m := capiObj("Machine", name, nil)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		m.SetAnnotations(map[string]string{v1alpha1.AnnotationLaunchedBy: string(f.ng.UID)})
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(m.Object, map[string]any{"nodeRef": map[string]any{"name": name}}, "status"); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := f.provider.Unadopted(ctx, f.ng, time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("Unadopted with the Machine's node adopted = %v, %v; want none", got, err)
	}
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "unadopted-a"}, node); err != nil {
		t.Fatal(err)
	}
	delete(node.Annotations, v1alpha1.AnnotationLaunchedBy) // registered, not adopted yet
	if err := env.Client.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if got, err := f.provider.Unadopted(ctx, f.ng, time.Hour); err != nil || !slices.Equal(got, []string{"unadopted-a"}) {
		t.Fatalf("Unadopted with the Machine's node not adopted = %v, %v; want unadopted-a", got, err)
	}
	f.clock.Step(2 * time.Hour)
	if got, err := f.provider.Unadopted(ctx, f.ng, time.Hour); err != nil || len(got) != 0 {
		t.Errorf("Unadopted of a Machine made 2 hours ago with maxWait 1h = %v, %v; want none", got, err)
	}
}

// TestUnadoptedGivesUpAMachineAfterTheObjectsAnnotatedTimeout: a
// Machine berth launched that has had no infrastructure for 12 minutes is
// given up (not waited for) under the default machine timeout of 10
// minutes, but still waited for when the object's
// max-node-provision-time annotation gives 30 minutes and the group sets
// none, as a launch reads it. Before, only the group's spec was read.
func TestUnadoptedGivesUpAMachineAfterTheObjectsAnnotatedTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{name: "default", want: nil},
		{name: "annotated", annotations: map[string]string{clusterapi.AnnotationMaxNodeProvisionTime: "30m"}, want: []string{"timeout-annotated-m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, "timeout-"+tc.name, 1, tc.annotations)
			name := "timeout-" + tc.name + "-m"
			addMachine(t, f.ng, "timeout-"+tc.name, name, false)
			m := capiObj("Machine", name, nil)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				t.Fatal(err)
			}
			m.SetAnnotations(map[string]string{v1alpha1.AnnotationLaunchedBy: string(f.ng.UID)})
			if err := env.Client.Update(ctx, m); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), m) })
			f.clock.Step(12 * time.Minute)
			if got, err := f.provider.Unadopted(ctx, f.ng, time.Hour); err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Unadopted = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestAMachineThatShowsLateIsStillMarkedAsBerths: a launch whose Machine
// the MachineSet controller made only after Create stopped waiting has
// that Machine marked as berth's launch by a later round's Pending (one
// Machine per launch; not a Machine that was there before, not one made
// more than 10 minutes after the launch), so the launch timeout may
// remove its node if it never turns Ready. Before, such a Machine stayed
// unmarked and its node was never timed out.
func TestAMachineThatShowsLateIsStillMarkedAsBerths(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "late", 1, nil, "late-old") // MachineWait < 0: Create does not wait
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	launch := func() {
		t.Helper()
		if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off}); err != nil {
			t.Fatal(err)
		}
	}
	stamped := func(name string) bool {
		t.Helper()
		return machineAnnotations(t, name)[v1alpha1.AnnotationLaunchedBy] == string(f.ng.UID)
	}
	launch()
	addMachine(t, f.ng, "late", "late-new", false) // the MachineSet's part, late
	if _, err := f.provider.Pending(ctx, f.ng); err != nil {
		t.Fatal(err)
	}
	if !stamped("late-new") || stamped("late-old") {
		t.Fatalf("marked: late-new %v, late-old %v; want only the launch's late Machine", stamped("late-new"), stamped("late-old"))
	}
	addMachine(t, f.ng, "late", "late-other", false) // no launch of berth's made it
	if _, err := f.provider.Pending(ctx, f.ng); err != nil {
		t.Fatal(err)
	}
	if stamped("late-other") {
		t.Error("a second new Machine was marked for the one launch")
	}
	launch()
	f.clock.Step(11 * time.Minute)
	addMachine(t, f.ng, "late", "late-much-later", false)
	if _, err := f.provider.Pending(ctx, f.ng); err != nil {
		t.Fatal(err)
	}
	if stamped("late-much-later") {
		t.Error("a Machine made 11 minutes after the launch was marked as its")
	}
}

// TestALateMachineOfANewMachineSetIsARollouts: a Machine that shows after
// a launch in a MachineSet the object did not have at the launch (a
// MachineDeployment's rollout) is not taken for the launch's; one of the
// MachineSet the object had is.
func TestALateMachineOfANewMachineSetIsARollouts(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "rollout", 1, nil)
	inSet := func(name, set string) {
		t.Helper()
		addMachine(t, f.ng, "rollout", name, false)
		m := capiObj("Machine", name, nil)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		l := m.GetLabels()
		l["cluster.x-k8s.io/set-name"] = set
		m.SetLabels(l)
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	inSet("rollout-old", "rollout-ms1")
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off}); err != nil {
		t.Fatal(err)
	}
	inSet("rollout-new-set", "rollout-ms2")
	if _, err := f.provider.Pending(ctx, f.ng); err != nil {
		t.Fatal(err)
	}
	stamped := func(name string) bool {
		return machineAnnotations(t, name)[v1alpha1.AnnotationLaunchedBy] == string(f.ng.UID)
	}
	if stamped("rollout-new-set") {
		t.Fatal("the Machine of a MachineSet made since the launch was taken for the launch's")
	}
	inSet("rollout-same-set", "rollout-ms1")
	if _, err := f.provider.Pending(ctx, f.ng); err != nil {
		t.Fatal(err)
	}
	if !stamped("rollout-same-set") {
		t.Error("the late Machine of the object's MachineSet was not marked as the launch's")
	}
}
