// Package virtualunits reads, from the cluster, the Headroom units and
// CapacityBuffer chunks berth plans as virtual pods. Scale-up plans
// capacity for them; scale-down keeps them a home. One reader for both, so
// that the two never disagree on what headroom is.
package virtualunits

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/state"
)

// Set is the virtual pods of one Headroom or CapacityBuffer.
type Set struct {
	Owner client.Object
	Key   state.Key
	Pods  []*corev1.Pod
}

// List returns the sets of every Headroom without placeholders (placeholder
// pods are real and counted already: a unit must not count twice) and of
// every CapacityBuffer ready for provisioning, by their resolved status.
func List(ctx context.Context, c client.Reader, groups []*v1alpha1.NodeGroup) ([]Set, error) {
	var out []Set
	hrs := &v1alpha1.HeadroomList{}
	if err := c.List(ctx, hrs); err != nil {
		return nil, fmt.Errorf("listing headrooms: %w", err)
	}
	for i := range hrs.Items {
		h := &hrs.Items[i]
		if h.Spec.Placeholders || h.Status.Unit == nil || h.Status.DesiredUnits == 0 {
			continue
		}
		scope, err := hr.ScopeGroups(h, groups)
		if err != nil {
			continue // reported on the Headroom by its controller
		}
		out = append(out, Set{Owner: h, Key: state.HeadroomKey(h.Name),
			Pods: hr.VirtualPods(h, hr.Resolved{Count: h.Status.DesiredUnits, Shape: *h.Status.Unit, Groups: scope})})
	}
	buffers := &cbv1beta1.CapacityBufferList{}
	if err := c.List(ctx, buffers); err != nil {
		if meta.IsNoMatchError(err) {
			return out, nil // the CapacityBuffer CRD is not installed
		}
		return nil, fmt.Errorf("listing capacity buffers: %w", err)
	}
	for i := range buffers.Items {
		cb := &buffers.Items[i]
		if !meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) ||
			cb.Status.PodTemplateRef == nil || cb.Status.Replicas == nil {
			continue
		}
		pt := &corev1.PodTemplate{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: cb.Status.PodTemplateRef.Name}, pt); err != nil {
			log.FromContext(ctx).V(1).Info("buffer template not found", "buffer", client.ObjectKeyFromObject(cb), "error", err.Error())
			continue
		}
		out = append(out, Set{Owner: cb, Key: state.BufferKey(cb.Namespace, cb.Name), Pods: hr.BufferPods(cb, &pt.Template, *cb.Status.Replicas)})
	}
	return out, nil
}
