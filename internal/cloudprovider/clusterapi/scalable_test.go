package clusterapi_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// Objects Cluster Autoscaler's clusterapi provider does not scale
// (pkg/cloudprovider/clusterapi, before its removal in a52a12bfa), and
// berth does not either (unscalable).

var capiOffering = cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}

// Cluster API does not reconcile a MachineDeployment annotated
// cluster.x-k8s.io/paused, so Cluster Autoscaler leaves it out of its node
// groups (clusterapi_controller.go nodeGroups, isScalableResourceAndPaused;
// clusterapi_provider_test.go TestNodeGroups "paused ... returns correct
// length") and does not associate its nodes with a group
// (nodeGroupForNode: "we do not want to associate the node with a node
// group as the group will also be paused"): it neither scales it up nor
// removes its nodes.
const annotationPaused = clusterapi.AnnotationPaused

// TestAPausedMachineDeploymentIsNotScaledUp: berth added a replica that no
// Machine follows while the MachineDeployment is paused (and, after the
// max provision time, planned the launch again and added another); all
// of them were made at once when it was unpaused. The group is planned
// held at its replicas (minSize and maxSize both), and Create refuses.
func TestAPausedMachineDeploymentIsNotScaledUp(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "paused-up", 1, map[string]string{annotationPaused: ""}, "paused-up-a")
	if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: capiOffering}); err == nil {
		t.Errorf("Create on a paused MachineDeployment succeeded")
	}
	if got := f.replicas(t); got != 1 {
		t.Errorf("replicas after Create = %d, want 1 (a paused MachineDeployment is not scaled up)", got)
	}
	ng := f.ng.DeepCopy()
	if err := f.provider.RefreshNodeGroup(ctx, ng); err != nil || ng.Spec.MinSize != 1 || ng.Spec.MaxSize != 1 {
		t.Errorf("refreshed: minSize %d maxSize %d (%v), want both 1: no launch or removal is planned", ng.Spec.MinSize, ng.Spec.MaxSize, err)
	}
}

// TestAPausedMachineDeploymentIsNotScaledDown: berth marked the Machine of
// a paused MachineDeployment's node and lowered its replicas.
func TestAPausedMachineDeploymentIsNotScaledDown(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "paused-down", 1, map[string]string{annotationPaused: ""}, "paused-down-a")
	if err := f.provider.Delete(ctx, "paused-down-a"); err == nil {
		t.Errorf("Delete of a node of a paused MachineDeployment succeeded")
	}
	if _, marked := machineAnnotations(t, "paused-down-a")[clusterapi.AnnotationDeleteMachine]; marked {
		t.Errorf("machine paused-down-a of a paused MachineDeployment marked %s", clusterapi.AnnotationDeleteMachine)
	}
	if got := f.replicas(t); got != 1 {
		t.Errorf("replicas after Delete = %d, want 1 (a paused MachineDeployment is not scaled down)", got)
	}
}

// TestAMachineSetOfAMachineDeploymentIsNotScaledOnItsOwn: a MachineSet
// owned by a MachineDeployment has its replicas set by the
// MachineDeployment controller, which undoes any other change. Cluster
// Autoscaler never makes such a MachineSet a node group
// (clusterapi_controller.go listScalableResources and
// machineSetHasMachineDeploymentOwnerRef; clusterapi_utils_test.go
// TestUtilMachineSetHasMachineDeploymentOwnerRef). berth scaled it: the
// new replica was taken back (a Machine created and deleted), and a
// scale-down's lowered replicas were raised again (the marked Machine
// replaced by a new one). Now Create refuses it, saying so.
func TestAMachineSetOfAMachineDeploymentIsNotScaledOnItsOwn(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "owned", 1, nil)
	d := capiObj("MachineDeployment", f.md, nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/deployment-name": f.md, "cluster.x-k8s.io/set-name": "owned-abc12"}
	ms := capiObj("MachineSet", "owned-abc12", map[string]any{
		"clusterName": "c", "replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
			"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "x"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "T", "name": "t"},
		}},
	})
	ms.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/deployment-name": f.md})
	ms.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "name": f.md, "uid": string(d.GetUID()), "controller": true,
	}}
	if err := env.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ms) })
	ng := b.NodeGroup("owned-ms", b.Size(0, 10))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Kind: v1alpha1.ClusterAPIMachineSet, Namespace: ns, Name: "owned-abc12"}}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ng) })
	if _, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: capiOffering}); err == nil {
		t.Errorf("Create on a MachineSet its MachineDeployment controls succeeded")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(ms.Object, "spec", "replicas"); got != 1 {
		t.Errorf("MachineSet replicas = %d, want 1: the MachineDeployment controller sets them back to the MachineDeployment's", got)
	}
}
