package clusterread

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
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/state"
)

// DefaultMaxUnits caps the headroom units and buffer chunks of all Headrooms
// and CapacityBuffers that one round plans: each object is bounded
// (headroom.MaxUnits), but many of them together must not make a round
// plan millions of pods.
const DefaultMaxUnits = 50000

// Set is the units of one Headroom or CapacityBuffer, not made yet.
type Set struct {
	Owner client.Object
	Key   state.Key
	// Count is how many units the object asks for.
	Count int32
	// make returns the first n units as pods.
	make func(n int32) []*corev1.Pod
}

// Pods makes the set's first n units (at most Count).
func (s Set) Pods(n int32) []*corev1.Pod { return s.make(min(n, s.Count)) }

// Units returns the sets of every Headroom (without the units its
// placeholder pods hold: those pods are real and counted already, and a
// unit must not count twice; its learned shapes' units are always
// virtual) and of every CapacityBuffer ready for provisioning, by their
// resolved status.
// No pod is made yet: see Share.
func Units(ctx context.Context, c client.Reader, groups []*v1alpha1.NodeGroup) ([]Set, error) {
	var out []Set
	hrs := &v1alpha1.HeadroomList{}
	if err := c.List(ctx, hrs); err != nil {
		return nil, fmt.Errorf("listing headrooms: %w", err)
	}
	for i := range hrs.Items {
		h := &hrs.Items[i]
		if h.Status.Unit == nil || h.Status.DesiredUnits <= 0 {
			continue
		}
		// A named group deleted since: the units of the last valid spec
		// stay in the groups left (the Headroom says its spec is invalid).
		scope, err := hr.ScopeGroupsLeft(h, groups)
		if err != nil {
			continue // no group left; reported on the Headroom by its controller
		}
		if s, ok := headroomSet(h, scope); ok {
			out = append(out, s)
		}
	}
	buffers := &cbv1beta1.CapacityBufferList{}
	if err := c.List(ctx, buffers); err != nil {
		if meta.IsNoMatchError(err) {
			return out, nil // the CapacityBuffer CRD is not installed
		}
		return nil, fmt.Errorf("listing capacity buffers: %w", err)
	}
	var lrs []*corev1.LimitRange // read once a buffer needs them
	for i := range buffers.Items {
		cb := &buffers.Items[i]
		if !meta.IsStatusConditionTrue(cb.Status.Conditions, cbv1beta1.ConditionReadyForProvisioning) ||
			cb.Status.PodTemplateRef == nil || cb.Status.Replicas == nil || *cb.Status.Replicas <= 0 {
			continue
		}
		if s := cb.Spec.ProvisioningStrategy; s != nil && *s != "" && *s != cbv1beta1.StrategyActiveCapacity {
			continue // kept on standby nodes (controller/standby), or another autoscaler's
		}
		pt := &corev1.PodTemplate{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: cb.Status.PodTemplateRef.Name}, pt); err != nil {
			log.FromContext(ctx).V(1).Info("buffer template not found", "buffer", client.ObjectKeyFromObject(cb), "error", err.Error())
			continue
		}
		if lrs == nil { // not nil, even empty, once read
			var err error
			if lrs, err = LimitRanges(ctx, c, ""); err != nil {
				return nil, err
			}
		}
		// The count comes from status, which other autoscalers serving the
		// same API may write too: bound it again.
		count := min(*cb.Status.Replicas, hr.MaxUnits)
		out = append(out, Set{Owner: cb, Key: state.BufferKey(cb.Namespace, cb.Name), Count: count, make: func(n int32) []*corev1.Pod {
			return hr.BufferPods(cb, &pt.Template, lrs, n)
		}})
	}
	return out, nil
}

// headroomSet is the virtual units of a Headroom, read from its status;
// false when it has none to plan.
func headroomSet(h *v1alpha1.Headroom, scope []*v1alpha1.NodeGroup) (Set, bool) {
	own, learned := statusUnits(h)
	total := own + learned.Total()
	return Set{Owner: h, Key: state.HeadroomKey(h.Name), Count: total, make: func(n int32) []*corev1.Pod {
		return hr.VirtualPods(h, firstUnits(*h.Status.Unit, own, learned, scope, n))
	}}, total > 0
}

// ResolvedSet is the set of a Headroom resolved in the same process (berth
// plan, berth simulate): its own units as r counts them, then its learned
// shapes', so that those tools cap all units together as the controller
// does (MakeUnits).
func ResolvedSet(h *v1alpha1.Headroom, r hr.Resolved) Set {
	learned := hr.Resolved{Learned: r.Learned}
	return Set{Owner: h, Key: state.HeadroomKey(h.Name), Count: r.Total(), make: func(n int32) []*corev1.Pod {
		return hr.VirtualPods(h, firstUnits(r.Shape, r.Count, learned, r.Groups, n))
	}}
}

// UnitPods are the units' pods.
func UnitPods(units []Unit) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(units))
	for _, u := range units {
		out = append(out, u.Pod)
	}
	return out
}

// statusUnits reads a Headroom's resolved units from its status: how many
// of its own shape berth plans as virtual pods (none with placeholders:
// those are real pods), and the learned shapes' units (always virtual).
// The counts come from status: they are bounded again rather than
// trusted.
func statusUnits(h *v1alpha1.Headroom) (own int32, learned hr.Resolved) {
	total := min(max(h.Status.DesiredUnits, 0), hr.MaxUnits)
	for _, l := range h.Status.LearnedUnits {
		if len(learned.Learned) == demand.MaxShapes || l.Count <= 0 || len(l.Resources) == 0 {
			continue
		}
		n := min(l.Count, total-learned.Total())
		learned.Learned = append(learned.Learned, v1alpha1.LearnedUnits{Resources: l.Resources, Count: n})
	}
	own = total - learned.Total()
	if h.Spec.Placeholders {
		own = 0
	}
	return own, learned
}

// firstUnits are the first n units: of the Headroom's own shape, then of
// the learned shapes in order.
func firstUnits(unit v1alpha1.UnitShape, own int32, learned hr.Resolved, scope []*v1alpha1.NodeGroup, n int32) hr.Resolved {
	r := hr.Resolved{Count: min(own, n), Shape: unit, Groups: scope}
	n -= r.Count
	for _, l := range learned.Learned {
		if n <= 0 {
			break
		}
		l.Count = min(l.Count, n)
		n -= l.Count
		r.Learned = append(r.Learned, l)
	}
	return r
}

// Unit is one virtual pod and the set it belongs to.
type Unit struct {
	Pod *corev1.Pod
	Key state.Key
}

// Capped is a set that got fewer units than it asks for.
type Capped struct {
	Set     Set
	Allowed int32
}

// MakeUnits shares max units among the sets (see Share) and makes only the
// units each set is allowed.
func MakeUnits(sets []Set, max int) ([]Unit, []Capped) {
	allowed := Share(sets, max)
	var units []Unit
	var capped []Capped
	for i, s := range sets {
		for _, p := range s.Pods(allowed[i]) {
			units = append(units, Unit{Pod: p, Key: s.Key})
		}
		if allowed[i] < s.Count {
			capped = append(capped, Capped{Set: s, Allowed: allowed[i]})
		}
	}
	return units, capped
}
