package scaledown

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Recheck reports whether a node berth is draining (it carries the
// disrupted taint) is still removable: its remaining pods are not blocked
// by a rule and have a home elsewhere, after the pods of the other nodes
// being drained and the pods that wait for a node took their room, and,
// before its drain starts, no pod not bound yet is nominated to it. Budget,
// minSize and consolidateAfter were satisfied when the drain started and
// are not checked again; neither are PodDisruptionBudgets (the Eviction
// API enforces them while the drain goes on, until its timeout). It
// returns nil when the drain may go on, or why it must stop.
func Recheck(in Input, name string) (*Blocked, error) {
	// A drain waits for PodDisruptionBudgets: they do not stop a drain in
	// progress.
	in.PDBs = unlimited(in.PDBs)
	in.Held = nil
	p, err := newPlanner(in)
	if err != nil {
		return nil, err
	}
	defer in.Base.Release(p.s)
	n := p.s.Node(name)
	if n == nil {
		return nil, nil // gone already
	}
	g := p.groups[n.NodeGroup]
	if g == nil {
		return &Blocked{Node: name, Reason: ReasonNotOwned, Message: "node " + name + " belongs to no node group"}, nil
	}
	if why := OptedOut(n.Node); why != "" && n.Annotations[v1alpha1.AnnotationDisruptionReason] != string(v1alpha1.ReasonInterrupted) {
		return &Blocked{Node: name, NodeGroup: g.Name, Reason: ReasonNodeDoNotDisrupt, Message: "node " + name + " " + why}, nil
	}
	if !nodeutil.Disrupted(n.Node) {
		// Before the drain starts (its replacement is up): a pod
		// kube-scheduler nominated to the node, having preempted one of
		// its pods for it, would lose that room, its victim killed for
		// nothing (the planner keeps such a node too: PodNominated). Once
		// the node is tainted, no pod binds there and the drain goes on.
		if pod := p.nominated[name]; pod != nil {
			ref := scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}
			return &Blocked{Node: name, NodeGroup: g.Name, Reason: ReasonNominated, Pod: &ref,
				Message: "pod " + ref.String() + " is not bound yet and is nominated to node " + name}, nil
		}
	}
	p.holdNominated(in.Nominated)
	p.settle(name, in.Pending)
	placeVirtual(p.s, p.groups, in.Virtual)
	movers, _, blocked := p.classify(n, g)
	if blocked != nil || retiring(g) {
		return blocked, nil // a deleted group's pods need no home here
	}
	movers = slices.DeleteFunc(movers, func(sp *snapshot.Pod) bool { return remadeWhileTerminating(sp.Pod) })
	if _, _, homeless := p.rehome(n, movers); homeless != nil {
		ref := scaleup.PodRef{Namespace: homeless.Namespace, Name: homeless.Name}
		return &Blocked{Node: name, NodeGroup: g.Name, Reason: ReasonNoHome, Pod: &ref, Message: "pod " + ref.String() + " would fit on no other node"}, nil
	}
	return nil, nil
}

// unlimited returns copies of the budgets that allow any disruption.
func unlimited(pdbs []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	out := make([]*policyv1.PodDisruptionBudget, len(pdbs))
	for i, pdb := range pdbs {
		cp := *pdb
		cp.Status.DisruptionsAllowed = math.MaxInt32
		out[i] = &cp
	}
	return out
}

// CheckPods runs the drain rules on the pods a node being drained holds
// now (read fresh from the API server, not the plan's view): the pods
// that must still be evicted, or the first pod that blocks the removal.
// Budgets aside (the Eviction API enforces them), it is the check that
// planned the removal, so a pod that arrived after the decision (one the
// cache had not shown, one that tolerates every taint, one created with
// its node set) keeps the rules: a bare pod, a do-not-disrupt pod or
// local storage stops the drain instead of being evicted. in gives the
// budgets, the time and the controllers that exist.
func CheckPods(in Input, node string, pods []*corev1.Pod) ([]*corev1.Pod, *Blocked) {
	ctx := &drain.Context{PDBs: drain.NewBudgets(unlimited(in.PDBs)), Now: in.Now, Controllers: in.Controllers}
	rules := drain.Rules()
	var moving []*corev1.Pod
	for _, pod := range pods {
		switch o := drain.Check(rules, pod, ctx); o.Verdict {
		case drain.Blocks:
			ref := scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}
			return nil, &Blocked{Node: node, Reason: o.Reason, Pod: &ref, Message: o.Message}
		case drain.Moves:
			moving = append(moving, pod)
		}
	}
	return moving, nil
}

// remadeWhileTerminating reports whether a pod is being deleted and its
// controller makes its replacement at once, without waiting for it to
// go: a ReplicaSet's or a ReplicationController's. The replacement is
// among the input's pods (pending, or bound elsewhere) and takes its own
// room: the pod shutting down needs no second home. (A StatefulSet makes
// its pod again only once it is gone, under the same name: it still
// needs one.) Without this, a drain re-checked after a restart, or when a
// pod landed on the node, counted every evicted pod twice and stopped.
func remadeWhileTerminating(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	ref := metav1.GetControllerOf(pod)
	return ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "ReplicationController")
}
