// Package multi routes each cloud-provider call to the provider that a
// node group's spec.provider names, so that KWOK and Cluster API groups can
// live in one cluster.
package multi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// Provider routes calls by node group.
type Provider struct {
	client client.Reader
	kwok   cloudprovider.CloudProvider
	// capi is nil when berth was not given a management cluster.
	capi cloudprovider.CloudProvider
	// fresh reads a node the cache does not show (WithAPIReader; nil:
	// none).
	fresh client.Reader
}

var (
	_ cloudprovider.CloudProvider      = (*Provider)(nil)
	_ cloudprovider.NodeGroupRefresher = (*Provider)(nil)
	_ cloudprovider.PendingLister      = (*Provider)(nil)
	_ cloudprovider.RemovalCanceler    = (*Provider)(nil)
	_ cloudprovider.Suspender          = (*Provider)(nil)
)

// New returns a router over the KWOK provider and the Cluster API
// provider, which is nil when berth was not given a management cluster. c
// reads Nodes and NodeGroups.
func New(c client.Reader, kwokProvider, capi cloudprovider.CloudProvider) *Provider {
	return &Provider{client: c, kwok: kwokProvider, capi: capi}
}

// WithAPIReader has a node the cache does not show read from r (the API
// server) before it is taken for gone (a node created a moment ago), and
// returns p.
func (p *Provider) WithAPIReader(r client.Reader) *Provider {
	p.fresh = r
	return p
}

// Name returns "multi".
func (p *Provider) Name() string { return "multi" }

func (p *Provider) forGroup(ng *v1alpha1.NodeGroup) (cloudprovider.CloudProvider, error) {
	switch {
	case ng.Spec.Provider.ClusterAPI != nil:
		if p.capi == nil {
			return nil, &notEnabledError{group: ng.Name}
		}
		return p.capi, nil
	case ng.Spec.Provider.KWOK != nil:
		return p.kwok, nil
	}
	return nil, fmt.Errorf("node group %s has no provider", ng.Name)
}

func (p *Provider) forNode(ctx context.Context, nodeName string) (cloudprovider.CloudProvider, error) {
	node := &corev1.Node{}
	err := p.client.Get(ctx, client.ObjectKey{Name: nodeName}, node)
	if apierrors.IsNotFound(err) && p.fresh != nil {
		err = p.fresh.Get(ctx, client.ObjectKey{Name: nodeName}, node)
	}
	if apierrors.IsNotFound(err) {
		return nil, &cloudprovider.NotFoundError{Name: nodeName}
	} else if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	return p.forGroupName(ctx, node.Labels[v1alpha1.LabelNodeGroup], nodeName)
}

func (p *Provider) forGroupName(ctx context.Context, group, what string) (cloudprovider.CloudProvider, error) {
	if group == "" {
		return nil, &cloudprovider.NotFoundError{Name: what}
	}
	ng := &v1alpha1.NodeGroup{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: group}, ng); apierrors.IsNotFound(err) {
		return nil, &cloudprovider.NotFoundError{Name: what}
	} else if err != nil {
		return nil, fmt.Errorf("reading node group %s: %w", group, err)
	}
	return p.forGroup(ng)
}

// Create launches through the group's provider.
func (p *Provider) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	cp, err := p.forGroup(req.NodeGroup)
	if err != nil {
		return nil, err
	}
	return cp.Create(ctx, req)
}

// Delete removes the node through its group's provider.
func (p *Provider) Delete(ctx context.Context, nodeName string) error {
	cp, err := p.forNode(ctx, nodeName)
	if err != nil {
		return err
	}
	return cp.Delete(ctx, nodeName)
}

// Get asks the node's group's provider.
func (p *Provider) Get(ctx context.Context, nodeName string) (*cloudprovider.Instance, error) {
	cp, err := p.forNode(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return cp.Get(ctx, nodeName)
}

// List asks the group's provider.
func (p *Provider) List(ctx context.Context, nodeGroup string) ([]*cloudprovider.Instance, error) {
	cp, err := p.forGroupName(ctx, nodeGroup, nodeGroup)
	if cloudprovider.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return cp.List(ctx, nodeGroup)
}

// RefreshNodeGroup lets a refreshing provider update the group.
func (p *Provider) RefreshNodeGroup(ctx context.Context, ng *v1alpha1.NodeGroup) error {
	cp, err := p.forGroup(ng)
	if err != nil {
		return err
	}
	if r, ok := cp.(cloudprovider.NodeGroupRefresher); ok {
		return r.RefreshNodeGroup(ctx, ng)
	}
	return nil
}

// Pending asks the group's provider, if it has pending instances at all.
func (p *Provider) Pending(ctx context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	cp, err := p.forGroup(ng)
	if err != nil {
		return nil, err
	}
	if l, ok := cp.(cloudprovider.PendingLister); ok {
		return l.Pending(ctx, ng)
	}
	return nil, nil
}

// Unadopted asks the group's provider, if its machines register later.
func (p *Provider) Unadopted(ctx context.Context, ng *v1alpha1.NodeGroup, maxWait time.Duration) ([]string, error) {
	cp, err := p.forGroup(ng)
	if err != nil {
		return nil, err
	}
	if l, ok := cp.(cloudprovider.UnadoptedLister); ok {
		return l.Unadopted(ctx, ng, maxWait)
	}
	return nil, nil
}

// notEnabledError: a group's provider is not enabled in this controller.
type notEnabledError struct{ group string }

func (e *notEnabledError) Error() string {
	return fmt.Sprintf("node group %s uses the clusterAPI provider, which is not enabled: start the controller with --clusterapi", e.group)
}

func (e *notEnabledError) Unwrap() error { return cloudprovider.ErrNotEnabled }

// CancelRemoval asks the node's group's provider, if its removals can be
// undone. A group whose provider is not enabled has nothing this
// controller can undo (nil): a removal a run with the provider left half
// done stays as it is.
func (p *Provider) CancelRemoval(ctx context.Context, nodeName string) error {
	cp, err := p.forNode(ctx, nodeName)
	var off *notEnabledError
	if cloudprovider.IsNotFound(err) || errors.As(err, &off) {
		return nil // no node, no group, or no provider: nothing berth can undo
	} else if err != nil {
		return err
	}
	if c, ok := cp.(cloudprovider.RemovalCanceler); ok {
		return c.CancelRemoval(ctx, nodeName)
	}
	return nil
}

// Removing asks the group's provider, if its removals can be undone.
func (p *Provider) Removing(ctx context.Context, ng *v1alpha1.NodeGroup) ([]string, error) {
	cp, err := p.forGroup(ng)
	if err != nil {
		return nil, err
	}
	if c, ok := cp.(cloudprovider.RemovalCanceler); ok {
		return c.Removing(ctx, ng)
	}
	return nil, nil
}

// Suspend asks the node's group's provider, which must be a Suspender.
func (p *Provider) Suspend(ctx context.Context, nodeName string) error {
	s, err := p.suspender(ctx, nodeName)
	if err != nil {
		return err
	}
	return s.Suspend(ctx, nodeName)
}

// Resume asks the node's group's provider, which must be a Suspender.
func (p *Provider) Resume(ctx context.Context, nodeName string) error {
	s, err := p.suspender(ctx, nodeName)
	if err != nil {
		return err
	}
	return s.Resume(ctx, nodeName)
}

// CanSuspend reports whether the group's provider can suspend machines.
func (p *Provider) CanSuspend(ng *v1alpha1.NodeGroup) bool {
	cp, err := p.forGroup(ng)
	if err != nil {
		return false
	}
	_, ok := cp.(cloudprovider.Suspender)
	return ok
}

func (p *Provider) suspender(ctx context.Context, nodeName string) (cloudprovider.Suspender, error) {
	cp, err := p.forNode(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	s, ok := cp.(cloudprovider.Suspender)
	if !ok {
		return nil, fmt.Errorf("the provider of node %s (%s) cannot suspend machines", nodeName, cp.Name())
	}
	return s, nil
}
