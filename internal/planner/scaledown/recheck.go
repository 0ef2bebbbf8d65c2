package scaledown

import (
	"math"

	policyv1 "k8s.io/api/policy/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// Recheck reports whether a node berth is draining (it carries the
// disrupted taint, say after a controller restart) is still removable: its
// remaining pods are not blocked by a rule and have a home elsewhere.
// Budget, minSize and consolidateAfter were satisfied when the drain
// started and are not checked again. It returns nil when the drain may go
// on, or why it must stop.
func Recheck(in Input, name string) (*Blocked, error) {
	s, err := scaleup.ClusterSnapshot(scaleup.Input{NodeGroups: in.NodeGroups, Nodes: in.Nodes, Pods: in.Pods,
		Namespaces: in.Namespaces, Claims: in.Claims, Volumes: in.Volumes, DRA: in.DRA, ClusterLimits: in.ClusterLimits})
	if err != nil {
		return nil, err
	}
	n := s.Node(name)
	if n == nil {
		return nil, nil // gone already
	}
	var g *v1alpha1.NodeGroup
	for _, ng := range in.NodeGroups {
		if ng.Name == n.NodeGroup {
			g = ng
		}
	}
	if g == nil {
		return &Blocked{Node: name, Reason: ReasonNotOwned, Message: "node " + name + " belongs to no node group"}, nil
	}
	// A drain waits for PodDisruptionBudgets (the Eviction API enforces
	// them, until the drain timeout): they do not stop a drain in progress.
	pdbs := make([]*policyv1.PodDisruptionBudget, len(in.PDBs))
	for i, pdb := range in.PDBs {
		cp := *pdb
		cp.Status.DisruptionsAllowed = math.MaxInt32
		pdbs[i] = &cp
	}
	p := &planner{s: s, plan: &Plan{}, groups: map[string]*v1alpha1.NodeGroup{g.Name: g}, budgets: drain.NewBudgets(pdbs), rules: drain.Rules()}
	for _, other := range s.Nodes {
		if disrupted(other.Node) || other.Annotations[v1alpha1.AnnotationReplacedBy] != "" {
			s.Cordon(other) // going too: no home
		}
	}
	placeVirtual(s, in.Virtual)
	movers, _, blocked := p.classify(n, g)
	if blocked != nil {
		return blocked, nil
	}
	if _, homeless := p.rehome(n, movers); homeless != nil {
		ref := scaleup.PodRef{Namespace: homeless.Namespace, Name: homeless.Name}
		return &Blocked{Node: name, NodeGroup: g.Name, Reason: ReasonNoHome, Pod: &ref, Message: "pod " + ref.String() + " would fit on no other node"}, nil
	}
	return nil, nil
}
