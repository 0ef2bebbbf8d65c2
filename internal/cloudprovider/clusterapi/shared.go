package clusterapi

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// scaledBy returns the node group that scales ng's object: of the node
// groups not being deleted that name it, the first by name. Two groups
// naming one object would each count its Machines as their own launches
// and nodes (a round that planned the same booting node twice failed for
// every group); the others are held (RefreshNodeGroup) and list nothing
// pending, removing or adoptable.
func (p *Provider) scaledBy(ctx context.Context, ng *v1alpha1.NodeGroup, r ref) (string, error) {
	// Read only, in every round for every group: the cache's objects, not
	// copies of them.
	groups := &v1alpha1.NodeGroupList{}
	if err := p.cluster.List(ctx, groups, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing node groups: %w", err)
	}
	first := ng.Name
	for i := range groups.Items {
		g := &groups.Items[i]
		if g.Name >= first || g.Spec.Provider.ClusterAPI == nil || g.DeletionTimestamp != nil {
			continue
		}
		if gr, err := refOf(g); err == nil && gr.key() == r.key() {
			first = g.Name
		}
	}
	return first, nil
}

// shadowed says why ng does not scale its object ("" when it does):
// another node group, first by name, names the same object (scaledBy).
func (p *Provider) shadowed(ctx context.Context, ng *v1alpha1.NodeGroup, r ref) (string, error) {
	if ng.DeletionTimestamp != nil {
		return "", nil
	}
	first, err := p.scaledBy(ctx, ng, r)
	if err != nil || first == ng.Name {
		return "", err
	}
	return fmt.Sprintf("node group %s names %s too and scales it (the first by name): node group %s launches and removes nothing; point it at another object or delete it",
		first, r, ng.Name), nil
}

// holdAtNodes keeps a group that does not scale its object (shadowed) at
// the nodes labelled with it (minSize and maxSize both): nothing is
// planned to launch or remove there.
func (p *Provider) holdAtNodes(ctx context.Context, ng *v1alpha1.NodeGroup) error {
	nodes := &corev1.NodeList{}
	if err := p.cluster.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: ng.Name}); err != nil {
		return fmt.Errorf("listing the nodes of node group %s: %w", ng.Name, err)
	}
	n := int32(min(len(nodes.Items), math.MaxInt32))
	ng.Spec.MinSize, ng.Spec.MaxSize = n, n
	return nil
}
