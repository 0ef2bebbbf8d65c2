package provisioning

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
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
)

// +kubebuilder:rbac:groups=berth.dev,resources=headrooms,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch

// DefaultMaxVirtualPods caps the headroom units and buffer chunks of all
// Headrooms and CapacityBuffers that one round plans: each object is
// bounded (headroom.MaxUnits), but many of them together must not make a
// round plan millions of pods. Objects are taken in list order (by name);
// those past the cap get a VirtualUnitsCapped event.
const DefaultMaxVirtualPods = 50000

// ReasonVirtualUnitsCapped is the event reason on a Headroom or
// CapacityBuffer whose units were cut by MaxVirtualPods.
const ReasonVirtualUnitsCapped = "VirtualUnitsCapped"

// virtualUnits returns the headroom units and buffer chunks to add to the
// plan as pods, and the readiness key of each. Headrooms held by
// placeholders are not added: their placeholder pods are real and counted
// already, and a unit must not count twice.
func (p *Provisioner) virtualUnits(ctx context.Context, groups []*v1alpha1.NodeGroup) ([]*corev1.Pod, map[string]state.Key, error) {
	var pods []*corev1.Pod
	owner := map[string]state.Key{}
	add := func(obj client.Object, key state.Key, ps []*corev1.Pod) {
		if room := p.maxVirtualPods() - len(pods); len(ps) > room {
			p.warnCapped(obj, key, len(ps), room)
			ps = ps[:room]
		}
		for _, pod := range ps {
			pods = append(pods, pod)
			owner[pod.Namespace+"/"+pod.Name] = key
		}
	}
	hrs := &v1alpha1.HeadroomList{}
	if err := p.Client.List(ctx, hrs); err != nil {
		return nil, nil, fmt.Errorf("listing headrooms: %w", err)
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
		add(h, state.HeadroomKey(h.Name), hr.VirtualPods(h, hr.Resolved{Count: h.Status.DesiredUnits, Shape: *h.Status.Unit, Groups: scope}))
	}
	buffers := &cbv1beta1.CapacityBufferList{}
	if err := p.Client.List(ctx, buffers); err != nil {
		if meta.IsNoMatchError(err) {
			return pods, owner, nil // the CapacityBuffer CRD is not installed
		}
		return nil, nil, fmt.Errorf("listing capacity buffers: %w", err)
	}
	for i := range buffers.Items {
		cb := &buffers.Items[i]
		if !meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) ||
			cb.Status.PodTemplateRef == nil || cb.Status.Replicas == nil {
			continue
		}
		pt := &corev1.PodTemplate{}
		if err := p.Client.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: cb.Status.PodTemplateRef.Name}, pt); err != nil {
			log.FromContext(ctx).V(1).Info("buffer template not found", "buffer", client.ObjectKeyFromObject(cb), "error", err.Error())
			continue
		}
		add(cb, state.BufferKey(cb.Namespace, cb.Name), hr.BufferPods(cb, &pt.Template, *cb.Status.Replicas))
	}
	return pods, owner, nil
}

// readiness counts, per headroom and buffer, the virtual units the plan put
// on nodes that are Ready now: the units that fit in free capacity.
func readiness(plan *scaleup.Plan, owner map[string]state.Key, nodes []*corev1.Node) map[state.Key]int32 {
	ready := map[state.Key]int32{}
	for _, key := range owner {
		ready[key] = 0
	}
	if plan == nil {
		return ready
	}
	up := map[string]bool{}
	for _, n := range nodes {
		up[n.Name] = nodeutil.Schedulable(n)
	}
	for _, pl := range plan.ExistingNodePlacements {
		if key, ok := owner[pl.Pod.String()]; ok && up[pl.Node] {
			ready[key]++
		}
	}
	return ready
}

// warnCapped records, once per change, that an object's units were cut.
func (p *Provisioner) warnCapped(obj client.Object, key state.Key, wanted, planned int) {
	msg := fmt.Sprintf("Only %d of %d units are planned: all Headrooms and CapacityBuffers together are limited to %d units per round",
		planned, wanted, p.maxVirtualPods())
	p.eventMu.Lock()
	same := p.lastCapped[key] == msg
	p.lastCapped[key] = msg
	p.eventMu.Unlock()
	if !same {
		p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonVirtualUnitsCapped, "Plan", "%s", msg)
	}
}

func (p *Provisioner) maxVirtualPods() int {
	if p.opts.MaxVirtualPods > 0 {
		return p.opts.MaxVirtualPods
	}
	return DefaultMaxVirtualPods
}
