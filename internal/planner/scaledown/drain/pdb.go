package drain

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonPDB is the reason of a pod whose PodDisruptionBudget allows no
// more disruption now.
const ReasonPDB Reason = "PodDisruptionBudget"

// Budgets are the PodDisruptionBudgets and the disruptions each still
// allows in this round (status.disruptionsAllowed minus what the round has
// planned already), by namespace and name (hand-written inputs of
// `berth plan` carry no UIDs).
type Budgets struct {
	pdbs      []*policyv1.PodDisruptionBudget
	selectors []labels.Selector
	left      map[types.NamespacedName]int32
	// byLabel indexes the PDBs whose selector has matchLabels by their
	// namespace and one of those labels: a pod can only match the ones
	// filed under a label it carries. scan holds, by namespace, the
	// others. So a pod is checked against its own few PDBs, not every
	// PDB of the cluster.
	byLabel map[nsLabel][]int
	scan    map[string][]int
	// namespaces holds the namespaces with a PDB: a pod of any other
	// namespace (most pods, in most clusters) is answered at once.
	namespaces map[string]bool
}

type nsLabel struct{ namespace, key, value string }

// NewBudgets reads the PDBs; one with an invalid selector matches nothing
// (the API server rejects those anyway).
func NewBudgets(pdbs []*policyv1.PodDisruptionBudget) *Budgets {
	b := &Budgets{left: map[types.NamespacedName]int32{}, byLabel: map[nsLabel][]int{}, scan: map[string][]int{}, namespaces: map[string]bool{}}
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || p.Spec.Selector == nil {
			continue
		}
		i := len(b.pdbs)
		b.pdbs = append(b.pdbs, p)
		b.selectors = append(b.selectors, sel)
		b.left[key(p)] = p.Status.DisruptionsAllowed
		b.namespaces[p.Namespace] = true
		if k, ok := firstKey(p.Spec.Selector.MatchLabels); ok {
			nl := nsLabel{p.Namespace, k, p.Spec.Selector.MatchLabels[k]}
			b.byLabel[nl] = append(b.byLabel[nl], i)
		} else {
			b.scan[p.Namespace] = append(b.scan[p.Namespace], i)
		}
	}
	return b
}

// firstKey is the smallest key of m, so that the index does not depend on
// map order.
func firstKey(m map[string]string) (string, bool) {
	first, ok := "", false
	for k := range m {
		if !ok || k < first {
			first, ok = k, true
		}
	}
	return first, ok
}

// Matching returns the PDBs that cover the pod, in the order they were
// given. O(the pod's labels + the PDBs filed under them).
func (b *Budgets) Matching(p *corev1.Pod) []*policyv1.PodDisruptionBudget {
	if b == nil || !b.namespaces[p.Namespace] {
		return nil
	}
	var idx []int
	for _, i := range b.scan[p.Namespace] {
		if b.selectors[i].Matches(labels.Set(p.Labels)) {
			idx = append(idx, i)
		}
	}
	for k, v := range p.Labels {
		for _, i := range b.byLabel[nsLabel{p.Namespace, k, v}] {
			if b.selectors[i].Matches(labels.Set(p.Labels)) {
				idx = append(idx, i)
			}
		}
	}
	if len(idx) == 0 {
		return nil
	}
	slices.Sort(idx)
	out := make([]*policyv1.PodDisruptionBudget, len(idx))
	for j, i := range idx {
		out[j] = b.pdbs[i]
	}
	return out
}

// Take plans the eviction of pods: it fails, naming the budget, if one of
// their PDBs would allow fewer disruptions than the pods it covers, and
// otherwise counts them against every PDB.
func (b *Budgets) Take(pods []*corev1.Pod) error {
	need := map[types.NamespacedName]int32{}
	for _, p := range pods {
		for _, pdb := range b.Matching(p) {
			if !evictedFreely(p, pdb) {
				need[key(pdb)]++
			}
		}
	}
	for k, n := range need {
		if b.left[k] < n {
			return fmt.Errorf("PodDisruptionBudget %s allows %d more disruptions now, %d pods of the node need one", k, max(b.left[k], 0), n)
		}
	}
	for k, n := range need {
		b.left[k] -= n
	}
	return nil
}

func key(pdb *policyv1.PodDisruptionBudget) types.NamespacedName {
	return types.NamespacedName{Namespace: pdb.Namespace, Name: pdb.Name}
}

// unguarded reports whether the Eviction API evicts a pod without looking
// at its PodDisruptionBudgets (kube-apiserver's canIgnorePDB): it has not
// started (phase Pending), has finished, or is being deleted.
func unguarded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
		p.DeletionTimestamp != nil
}

// evictedFreely reports whether the Eviction API evicts the pod without
// using a disruption of pdb, as kube-apiserver decides it: a pod not
// started, or one not Ready (it is no healthy pod the budget guards) when
// the budget's unhealthyPodEvictionPolicy is AlwaysAllow, or, under the
// default IfHealthyBudget, while the budget has the healthy pods it
// desires.
func evictedFreely(p *corev1.Pod, pdb *policyv1.PodDisruptionBudget) bool {
	if unguarded(p) {
		return true
	}
	if podReady(p) {
		return false
	}
	if pol := pdb.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.DesiredHealthy > 0 && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DisruptionBudget blocks: a pod whose PodDisruptionBudget allows no disruption
// now keeps its node this round (budgets for several pods of one node are
// checked together by the planner with Budgets.Take), and so does a pod
// that more than one PodDisruptionBudget covers: the Eviction API refuses
// to evict it at all. A pod the Eviction API evicts without using a
// disruption (evictedFreely: not started, or not Ready where the budget
// lets such pods go) is not held by its budget.
type DisruptionBudget struct{}

// Name returns the rule's reason.
func (DisruptionBudget) Name() Reason { return ReasonPDB }

// Check implements Rule.
func (DisruptionBudget) Check(p *corev1.Pod, c *Context) Outcome {
	if unguarded(p) {
		return Outcome{}
	}
	pdbs := c.PDBs.Matching(p)
	if len(pdbs) > 1 {
		return Outcome{Verdict: Blocks, Reason: ReasonPDB,
			Message: fmt.Sprintf("pod %s is covered by %d PodDisruptionBudgets (%s and %s among them): the Eviction API refuses to evict such a pod",
				podName(p), len(pdbs), key(pdbs[0]), key(pdbs[1]))}
	}
	for _, pdb := range pdbs {
		if c.PDBs.left[key(pdb)] <= 0 && !evictedFreely(p, pdb) {
			return Outcome{Verdict: Blocks, Reason: ReasonPDB,
				Message: "pod " + podName(p) + ": PodDisruptionBudget " + pdb.Namespace + "/" + pdb.Name + " allows no disruption now"}
		}
	}
	return Outcome{}
}
