package scaledown

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// settle gives the pods that need a home before any removal is tried a
// place on the nodes that stay: the pods still on nodes being drained
// (except the node named keep, whose own pods the caller checks), those of
// nodes being replaced on their replacement, and the
// pods that wait for a node. They take their room first, so that no
// removal counts on room they are about to fill. A pod of a drained node
// that fits nowhere stays where it is (it will wait for a new node); the
// waiting pods that fit nowhere are returned: scale-up's matter, they
// hold no removal back (a replacement plans them, see tryReplace).
func (p *planner) settle(keep string, pending []*corev1.Pod) []*corev1.Pod {
	if p.homes == nil {
		p.homes = homes(p.s, p.groups)
	}
	for _, n := range p.s.Nodes {
		if n.Name == keep || !n.Unschedulable || !leaving(n.Node) {
			continue
		}
		homes, hint := p.homes, &p.hint
		if !nodeutil.Disrupted(n.Node) {
			// Replaced, not drained yet: once the node launched for its
			// pods is in the cluster, they go there first and the others
			// to the nodes that stay, as its replacement was planned
			// (tryReplace), and take that room before any removal is
			// tried (Karpenter simulates with the pods of the nodes it
			// deletes first). Until then they keep their room here: which
			// of them the new node takes is not known, and they take no
			// room a drain counts on.
			var repls []*snapshot.Node // a lifecycle replacement may be several nodes
			for _, name := range nodeutil.ReplacedBy(n.Node) {
				if r := p.s.Node(name); r != nil && !r.Unschedulable {
					repls = append(repls, r)
				}
			}
			if len(repls) == 0 {
				continue
			}
			homes, hint = append(repls, p.homes...), new(int)
		}
		for _, sp := range slices.Clone(n.Pods) {
			if sp.Annotations[v1alpha1.AnnotationVirtual] != "" || (drain.GoesWithNode{}).Check(sp.Pod, &drain.Context{Now: p.now}).Verdict == drain.Stays ||
				remadeWhileTerminating(sp.Pod) {
				continue // its replacement, if any, is among the pods already
			}
			unbound, c := p.unboundClass(sp)
			if c == nil {
				continue
			}
			// Off its node before its new home is looked for, as a
			// removal is simulated: what the pod itself holds (a
			// ReadWriteOncePod claim) must not keep it out. Where it fits
			// nowhere, the fork puts it back in its slot.
			_ = p.s.WithFork(func() (bool, error) {
				p.s.RemovePod(sp)
				to := firstFit(p.s, c, homes, hint)
				if to != nil {
					p.place(unbound, to)
				}
				return to != nil, nil
			})
		}
	}
	var unplaced []*corev1.Pod
	for _, pod := range pending {
		c, err := p.s.Classify(pod)
		if err != nil {
			unplaced = append(unplaced, pod)
			continue
		}
		p.s.Prepare(c)
		to := firstFit(p.s, c, p.homes, &p.hint)
		if to == nil {
			unplaced = append(unplaced, pod)
			continue
		}
		p.place(&snapshot.Pod{Pod: pod, Class: c}, to)
	}
	return unplaced
}

// holdNominated places each pod nominated to a node there, as a settled
// pod, where it fits: kube-scheduler keeps that room for it, and the pods
// of a node removed must not be planned into it (they would wait).
func (p *planner) holdNominated(pods []*corev1.Pod) {
	for _, pod := range pods {
		n := p.s.Node(pod.Status.NominatedNodeName)
		if n == nil {
			continue
		}
		c, err := p.s.Classify(pod)
		if err != nil {
			continue
		}
		p.s.Prepare(c)
		if to := firstFit(p.s, c, []*snapshot.Node{n}, new(int)); to != nil {
			p.place(&snapshot.Pod{Pod: pod, Class: c}, to)
		}
	}
}

// place adds a settled pod to a node of the snapshot.
func (p *planner) place(sp *snapshot.Pod, to *snapshot.Node) {
	p.settled[sp.Pod] = true
	p.s.AddPod(sp, to)
}
