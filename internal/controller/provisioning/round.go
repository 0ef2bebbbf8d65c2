package provisioning

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
)

// round is what one provisioning round works on, built by newRound in
// named steps.
type round struct {
	now time.Time
	// in is the planner's input.
	in     scaleup.Input
	groups map[string]*v1alpha1.NodeGroup
	// known are the nodes that exist or are being launched, by name.
	known map[string]bool
	// pending are the pods that need a node; waiting those plus the pods
	// holding a nomination.
	pending map[types.NamespacedName]*corev1.Pod
	waiting map[types.NamespacedName]bool
	// unlisted are the groups whose launching instances could not be
	// listed this round: it launches nothing there.
	unlisted map[string]bool
}

// newRound reads the cluster and brings the provisioner's bookkeeping up
// to date, each a named step: launched nodes the cache now shows are
// forgotten, nodes' first schedulable times recorded, pods sorted into
// placed and pending, stale nominations dropped, headroom units added.
func (p *Provisioner) newRound(ctx context.Context) (*round, error) {
	start := p.Clock.Now()
	r, pods, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { readDuration.Observe(p.Clock.Since(start).Seconds()) }()
	p.inflight.observe(r.in.Nodes)
	r.known = p.trackSchedulable(r.in.Nodes, r.now)
	p.recheckAt = time.Time{}
	p.sortPods(ctx, r, pods)
	p.forgetNominations(r.known, r.waiting, r.unlisted)
	virtual, owner, err := p.virtualUnits(ctx, r.in.NodeGroups)
	if err != nil {
		return nil, err
	}
	r.in.Pending = append(r.in.Pending, virtual...)
	p.virtualOwner = owner
	return r, nil
}

// trackSchedulable records when nodes were first seen schedulable and
// returns the names of all known nodes (launched ones not in the cache
// included).
func (p *Provisioner) trackSchedulable(nodes []*corev1.Node, now time.Time) map[string]bool {
	return p.schedulable.observe(p.inflight.merge(nodes), now)
}

// sortPods puts bound pods, and pods holding a nomination, into the plan
// input as placed, and pods that need a node as pending; it fills the
// round's pending and waiting sets. A pod held by a nomination moves
// recheckAt to the end of its grace. in.Pods may hold bound pods already
// (sorted by the index as the events came); pods are the others. A pod
// the scheduler has not tried yet needs a node when it has for another pod
// of its controller (podutil.Burst): a round plans the burst whole.
func (p *Provisioner) sortPods(ctx context.Context, r *round, pods []*corev1.Pod) {
	in, known, now := &r.in, r.known, r.now
	pending := map[types.NamespacedName]*corev1.Pod{}
	waiting := map[types.NamespacedName]bool{}
	r.pending, r.waiting = pending, waiting
	burst := podutil.NewBurst(pods)
	var nodes map[string]*corev1.Node // by name, made when a pod is nominated
	for _, pod := range pods {
		if podutil.IsBound(pod) {
			in.Pods = append(in.Pods, pod)
			continue
		}
		key := client.ObjectKeyFromObject(pod)
		if nodes == nil && pod.Status.NominatedNodeName != "" {
			nodes = make(map[string]*corev1.Node, len(in.Nodes))
			for _, n := range in.Nodes {
				nodes[n.Name] = n
			}
		}
		switch {
		case podutil.IsUnbound(pod) && known[pod.Status.NominatedNodeName] && !p.nominationFailed(pod, now) &&
			!p.neverUp(nodes[pod.Status.NominatedNodeName], now):
			// A pod nominated to a node (by berth, or by preemption) holds
			// room there: plan as if it were bound to it.
			p.noteGraceEnd(pod)
			in.Held = append(in.Held, podutil.HeldOn(pod, pod.Status.NominatedNodeName))
			waiting[key] = true
		// A nomination to a node that no longer exists (deleted after a
		// launch timeout, say) is stale: the pod needs a node again.
		case burst.AwaitsNode(pod) && p.nominated.mayBeBooting(key, known, r.unlisted):
			// berth launched a node for it that is not known this round,
			// while the launching instances of its group could not be
			// listed: it may be booting there. It waits for the next
			// round, not planned again.
			waiting[key] = true
		case burst.AwaitsNode(pod):
			if berth := p.nominated.get(key); berth != "" {
				// berth had planned this pod on a node; the scheduler did
				// not put it there (or not within the grace): plan again.
				p.logNominationLost(ctx, pod, berth)
			}
			in.Pending = append(in.Pending, pod)
			pending[key] = pod
			waiting[key] = true
		}
	}
}
