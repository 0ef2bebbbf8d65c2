package clusterapi_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
)

// TestManagedLabelsAreTheOnesClusterAPIKeepsOnTheNode: Cluster API's
// Machine controller syncs to the Node the labels of the node-role
// prefix and of the node-restriction.kubernetes.io and
// node.cluster.x-k8s.io domains (subdomains included), no others.
func TestManagedLabelsAreTheOnesClusterAPIKeepsOnTheNode(t *testing.T) {
	got := clusterapi.ManagedLabels(map[string]string{
		"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a", "team.node-restriction.kubernetes.io/x": "y",
		"node.cluster.x-k8s.io/tier": "gold", "team.node.cluster.x-k8s.io/name": "ml",
		"cluster.x-k8s.io/deployment-name": "md", "example.com/node.cluster.x-k8s.io": "no", "evilnode.cluster.x-k8s.io/x": "no",
		"app": "web",
	})
	want := map[string]string{"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a", "team.node-restriction.kubernetes.io/x": "y",
		"node.cluster.x-k8s.io/tier": "gold", "team.node.cluster.x-k8s.io/name": "ml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("managed labels (-want +got):\n%s", diff)
	}
}

// TestTemplateMetadataManagedLabelsLabelTheTemplate (a comparison with
// Cluster Autoscaler): a MachineDeployment whose machine template's labels
// include managed ones (Cluster API puts them on the Node) is planned
// with them, so that a pod selecting node-role.kubernetes.io/worker
// scales it, from zero too; the labels annotation wins, and a label Cluster
// API does not sync is not planned.
func TestTemplateMetadataManagedLabelsLabelTheTemplate(t *testing.T) {
	installCRDs(t)
	f := newFixture(t, "managed-labels", 0, map[string]string{clusterapi.AnnotationLabels: "node.cluster.x-k8s.io/tier=from-annotation"})
	ctx := context.Background()
	md := capiObj("MachineDeployment", f.md, nil)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	labels, _, _ := unstructured.NestedStringMap(md.Object, "spec", "template", "metadata", "labels")
	for k, v := range map[string]string{"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a",
		"team.node.cluster.x-k8s.io/name": "ml", "node.cluster.x-k8s.io/tier": "from-template", "not-propagated": "x"} {
		labels[k] = v
	}
	if err := unstructured.SetNestedStringMap(md.Object, labels, "spec", "template", "metadata", "labels"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, md); err != nil {
		t.Fatal(err)
	}
	ng := f.ng.DeepCopy()
	if failed := cloudprovider.Refresh(ctx, f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
		t.Fatal(failed)
	}
	it := &ng.Spec.InstanceTypes[0]
	got := ng.NodeLabels(it, &it.Offerings[0])
	for k, v := range map[string]string{"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a",
		"team.node.cluster.x-k8s.io/name": "ml", "node.cluster.x-k8s.io/tier": "from-annotation"} {
		if have, ok := got[k]; !ok || have != v {
			t.Errorf("template node label %s=%q missing (have %q, %v)", k, v, have, ok)
		}
	}
	if _, ok := got["not-propagated"]; ok {
		t.Error("a label Cluster API does not sync to the Node is on the template")
	}
}
