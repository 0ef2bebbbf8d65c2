package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/state"
)

// ReasonVirtualUnitsCapped is the event reason on a Headroom or
// CapacityBuffer whose units were cut by MaxVirtualPods.
const ReasonVirtualUnitsCapped = "VirtualUnitsCapped"

// virtualUnits returns the headroom units and buffer chunks to add to the
// plan as pods, and the readiness key of each. Units held by placeholders
// are not added: their placeholder pods are real and counted already, and
// a unit must not count twice (a Headroom's learned shapes' units are
// virtual all the same). The cap on all units is shared
// before any pod is made (clusterread.Share): Headrooms first, then
// CapacityBuffers fairly across namespaces.
func (p *Provisioner) virtualUnits(ctx context.Context, groups []*v1alpha1.NodeGroup) ([]*corev1.Pod, map[types.NamespacedName]state.Key, error) {
	sets, err := clusterread.Units(ctx, p.Client, groups)
	if err != nil {
		return nil, nil, err
	}
	units, capped := clusterread.MakeUnits(sets, p.maxVirtualPods())
	pods := make([]*corev1.Pod, 0, len(units))
	owner := make(map[types.NamespacedName]state.Key, len(units))
	for _, u := range units {
		pods = append(pods, u.Pod)
		owner[client.ObjectKeyFromObject(u.Pod)] = u.Key
	}
	for _, c := range capped {
		p.warnCapped(c.Set.Owner, c.Set.Key, int(c.Set.Count), int(c.Allowed))
	}
	return pods, owner, nil
}

// readiness counts, per headroom and buffer, the virtual units the plan put
// on nodes that are Ready now: the units that fit in free capacity.
func readiness(plan *scaleup.Plan, owner map[types.NamespacedName]state.Key, nodes []*corev1.Node) map[state.Key]int32 {
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
		if key, ok := owner[pl.Pod.Key()]; ok && up[pl.Node] {
			ready[key]++
		}
	}
	return ready
}

// warnCapped records, once per change, that an object's units were cut.
func (p *Provisioner) warnCapped(obj client.Object, key state.Key, wanted, planned int) {
	msg := fmt.Sprintf("Only %d of %d units are planned: all Headrooms and CapacityBuffers together are limited to %d units per round, Headrooms first, then buffers shared fairly across namespaces",
		planned, wanted, p.maxVirtualPods())
	p.unitEvents.say(key, obj, corev1.EventTypeWarning, ReasonVirtualUnitsCapped, "Plan", msg)
}

func (p *Provisioner) maxVirtualPods() int {
	if p.opts.MaxVirtualPods > 0 {
		return p.opts.MaxVirtualPods
	}
	return clusterread.DefaultMaxUnits
}
