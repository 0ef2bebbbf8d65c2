package standby

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	"github.com/berth-dev/berth/internal/state"
)

// buffer reads a CapacityBuffer with the standby strategy as an owner:
// its translated chunks (status.replicas, bounded) of its PodTemplate's
// requests, on offerings whose nodes its chunks could be scheduled on
// (node selector, required node affinity, the group's taints tolerated).
// A buffer that is gone, of another strategy or not translated keeps no
// standby units.
func (r *Reconciler) buffer(ctx context.Context, key types.NamespacedName) (owner, error) {
	o := owner{key: key, state: state.BufferKey(key.Namespace, key.Name)}
	cb := &cbv1beta1.CapacityBuffer{}
	if err := r.Client.Get(ctx, key, cb); client.IgnoreNotFound(err) != nil && !meta.IsNoMatchError(err) {
		return o, err
	} else if err != nil || cb.DeletionTimestamp != nil {
		return o, nil
	}
	st := cb.Status
	if s := cb.Spec.ProvisioningStrategy; s == nil || *s != cbv1beta1.StrategyStandbyCapacity { // the spec says; a status may be left from before
		return o, nil
	}
	if st.ProvisioningStrategy == nil || *st.ProvisioningStrategy != cbv1beta1.StrategyStandbyCapacity ||
		!meta.IsStatusConditionTrue(st.Conditions, cbv1beta1.ConditionReadyForProvisioning) || st.PodTemplateRef == nil || st.Replicas == nil {
		return o, nil
	}
	pt := &corev1.PodTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: st.PodTemplateRef.Name}, pt); err != nil {
		// Retried: a cache that has not seen the template yet must not make
		// the buffer look gone (its standby nodes would go). A template
		// that is really gone makes the buffer controller mark the buffer
		// not ready, and then it keeps no standby units.
		return o, fmt.Errorf("reading the PodTemplate of capacity buffer %s: %w", key, err)
	}
	lrs, err := clusterread.LimitRanges(ctx, r.Client, key.Namespace)
	if err != nil {
		return o, err
	}
	// As the API server admits a pod: limits alone are requests, and the
	// LimitRanges' defaults fill what the containers do not set.
	pod := &corev1.Pod{ObjectMeta: pt.Template.ObjectMeta,
		Spec: hr.ChunkSpec(&pt.Template, key.Namespace, lrs)}
	o.obj, o.desired = cb, min(max(*st.Replicas, 0), hr.MaxUnits)
	o.shape = resource.PodRequests(pod, resource.PodResourcesOptions{})
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	o.scope = func(all []*v1alpha1.NodeGroup) ([]*v1alpha1.NodeGroup, error) { return all, nil }
	o.fits = func(g *v1alpha1.NodeGroup, it *v1alpha1.InstanceType, off *v1alpha1.Offering) bool {
		node := &corev1.Node{}
		node.Labels = g.NodeLabels(it, off)
		if ok, err := affinity.Match(node); err != nil || !ok {
			return false
		}
		for _, t := range g.Spec.Template.Taints {
			taint := corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
			if !v1helper.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &taint, snapshot.TolerationComparisonOperators) {
				return false
			}
		}
		return true
	}
	if len(o.shape) == 0 {
		return o, fmt.Errorf("capacity buffer %s: its PodTemplate requests nothing", key)
	}
	return o, nil
}
