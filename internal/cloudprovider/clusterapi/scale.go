package clusterapi

import (
	"context"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/cloudprovider"
)

// getScale reads the object's scale subresource.
func (p *Provider) getScale(ctx context.Context, r ref) (*unstructured.Unstructured, int64, error) {
	scale := &unstructured.Unstructured{}
	scale.SetAPIVersion("autoscaling/v1")
	scale.SetKind("Scale")
	if err := p.mgmt.SubResource("scale").Get(ctx, r.object(), scale); err != nil {
		return nil, 0, fmt.Errorf("reading the scale of %s: %w", r, err)
	}
	replicas, _, err := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	if err != nil {
		return nil, 0, fmt.Errorf("reading the scale of %s: %w", r, err)
	}
	return scale, replicas, nil
}

// setScale writes replicas through the scale subresource, guarded by the
// resourceVersion it was read at: a concurrent change makes it fail with
// a conflict instead of overwriting.
func (p *Provider) setScale(ctx context.Context, r ref, scale *unstructured.Unstructured, replicas int64) error {
	if err := unstructured.SetNestedField(scale.Object, replicas, "spec", "replicas"); err != nil {
		return err
	}
	if err := p.mgmt.SubResource("scale").Update(ctx, r.object(), client.WithSubResourceBody(scale)); err != nil {
		return fmt.Errorf("scaling %s to %d replicas: %w", r, replicas, err)
	}
	return nil
}

// addReplica adds one replica unless that would exceed limit (a
// MaxSizeError: the replicas count every launch, Node or not). Launches of
// one round run in parallel: a conflict means another launch (or anyone)
// changed the replicas; it reads them again and adds one.
func (p *Provider) addReplica(ctx context.Context, r ref, group string, limit int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, replicas, err := p.getScale(ctx, r)
		if err != nil {
			return err
		}
		if replicas >= int64(limit) {
			return fmt.Errorf("%s has %d replicas, its maximum (node group maxSize and %s): not adding one: %w", r, replicas, AnnotationMaxSize,
				&cloudprovider.MaxSizeError{NodeGroup: group, MaxSize: limit, Nodes: int32(min(replicas, math.MaxInt32))})
		}
		return p.setScale(ctx, r, scale, replicas+1)
	})
}
