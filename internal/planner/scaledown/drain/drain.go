// Package drain decides, pod by pod, what removing a node means for it:
// the pod goes with the node (DaemonSet, mirror, finished and berth's own
// headroom pods), must be moved (evicted and rescheduled elsewhere), or
// blocks the removal. Each rule lives in its own file with its reason, and
// the rules run in a fixed order, the first that decides wins, as Cluster
// Autoscaler's drainability chain does. Pure: API types in, verdicts out.
package drain

import (
	corev1 "k8s.io/api/core/v1"
)

// Verdict is what a rule decides for a pod.
type Verdict int

const (
	// Undecided passes the pod to the next rule.
	Undecided Verdict = iota
	// Stays means the pod goes away with its node and needs no new home.
	Stays
	// Moves means the pod is evicted and must fit on another node.
	Moves
	// Blocks means the node may not be removed because of this pod.
	Blocks
)

// Reason names a rule; it is the reason of the ScaleDownBlocked event and
// the label of the unremovable-nodes metric.
type Reason string

// Outcome is a rule's decision and, for Blocks, a message naming the pod
// and what to change.
type Outcome struct {
	Verdict Verdict
	Reason  Reason
	Message string
}

// Context is what rules may consult besides the pod.
type Context struct {
	// PDBs are the cluster's PodDisruptionBudgets with the disruptions
	// each still allows in this round.
	PDBs *Budgets
	// AllowLocalStorage lets pods with local storage (emptyDir on disk,
	// hostPath) be evicted: their data is lost.
	AllowLocalStorage bool
}

// Rule is one drainability rule.
type Rule interface {
	Name() Reason
	Check(p *corev1.Pod, c *Context) Outcome
}

// Rules is the chain, in order.
func Rules() []Rule {
	return []Rule{
		GoesWithNode{},
		DoNotDisrupt{},
		SafeToEvict{},
		NotReplicated{},
		LocalStorage{},
		SystemPodWithoutPDB{},
		DisruptionBudget{},
	}
}

// Check runs the chain on a pod; a pod no rule decides on moves.
func Check(rules []Rule, p *corev1.Pod, c *Context) Outcome {
	for _, r := range rules {
		if o := r.Check(p, c); o.Verdict != Undecided {
			return o
		}
	}
	return Outcome{Verdict: Moves}
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
