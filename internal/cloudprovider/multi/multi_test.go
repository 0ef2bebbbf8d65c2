package multi_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/multi"
	"github.com/berth-dev/berth/internal/scheme"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// stub records which calls reached it.
type stub struct {
	name    string
	deleted []string
}

func (s *stub) Name() string { return s.name }
func (s *stub) Create(_ context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	return &cloudprovider.Instance{NodeName: s.name + "-node", NodeGroup: req.NodeGroup.Name}, nil
}
func (s *stub) Delete(_ context.Context, n string) error {
	s.deleted = append(s.deleted, n)
	return nil
}
func (s *stub) Get(context.Context, string) (*cloudprovider.Instance, error) {
	return &cloudprovider.Instance{NodeName: s.name}, nil
}
func (s *stub) List(context.Context, string) ([]*cloudprovider.Instance, error) { return nil, nil }

func capiGroup(name string) *v1alpha1.NodeGroup {
	ng := b.NodeGroup(name)
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: "md"}}
	return ng
}

func node(name, group string) *corev1.Node {
	n := b.Node(name, "2", "4Gi")
	n.Labels[v1alpha1.LabelNodeGroup] = group
	return n
}

// TestRoutesEachCallToTheGroupsProvider: calls about a node go to the
// provider of its node group; a node of no group is not found; a
// clusterAPI group without the Cluster API provider enabled is an error
// that says how to enable it.
func TestRoutesEachCallToTheGroupsProvider(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		b.NodeGroup("kwok-g"), capiGroup("capi-g"),
		node("k1", "kwok-g"), node("c1", "capi-g"), node("loose", ""),
	).Build()
	kwokStub, capiStub := &stub{name: "kwok"}, &stub{name: "capi"}
	p := multi.New(c, kwokStub, capiStub)
	for _, n := range []string{"k1", "c1"} {
		if err := p.Delete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if len(kwokStub.deleted) != 1 || kwokStub.deleted[0] != "k1" || len(capiStub.deleted) != 1 || capiStub.deleted[0] != "c1" {
		t.Errorf("kwok deleted %v, capi deleted %v: want k1 and c1", kwokStub.deleted, capiStub.deleted)
	}
	if err := p.Delete(ctx, "loose"); !cloudprovider.IsNotFound(err) {
		t.Errorf("Delete of a node of no group = %v, want NotFound", err)
	}
	inst, err := p.Create(ctx, cloudprovider.CreateRequest{NodeGroup: capiGroup("capi-g")})
	if err != nil || inst.NodeName != "capi-node" {
		t.Errorf("Create for a clusterAPI group = %+v, %v: want the capi provider's", inst, err)
	}

	without := multi.New(c, kwokStub, nil)
	if _, err := without.Create(ctx, cloudprovider.CreateRequest{NodeGroup: capiGroup("capi-g")}); err == nil || !strings.Contains(err.Error(), "--clusterapi") {
		t.Errorf("Create for a clusterAPI group without the provider = %v, want an error naming --clusterapi", err)
	}
	// Nothing can be undone there: a group deleted with deletionPolicy
	// Orphan is not held for ever by its node's removal.
	if err := without.CancelRemoval(ctx, "c1"); err != nil {
		t.Errorf("CancelRemoval for a node of a clusterAPI group without the provider = %v, want nil (nothing berth can undo)", err)
	}
}

// TestANodeTheCacheDoesNotShowIsRoutedFromTheAPIServer: a node created a
// moment ago is not in the cache yet; its deletion goes to its group's
// provider, read from the API server, not taken for a node gone.
func TestANodeTheCacheDoesNotShowIsRoutedFromTheAPIServer(t *testing.T) {
	ctx := context.Background()
	cache := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(b.NodeGroup("kwok-g")).Build()
	api := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(b.NodeGroup("kwok-g"), node("new-1", "kwok-g")).Build()
	kwokStub := &stub{name: "kwok"}
	if err := multi.New(cache, kwokStub, nil).Delete(ctx, "new-1"); !cloudprovider.IsNotFound(err) {
		t.Fatalf("without the API reader: %v, want NotFound (the cache alone)", err)
	}
	if err := multi.New(cache, kwokStub, nil).WithAPIReader(api).Delete(ctx, "new-1"); err != nil {
		t.Fatal(err)
	}
	if len(kwokStub.deleted) != 1 || kwokStub.deleted[0] != "new-1" {
		t.Errorf("kwok deleted %v, want new-1", kwokStub.deleted)
	}
}
