// Package drain decides, pod by pod, what removing a node means for it:
// the pod goes with the node (DaemonSet, mirror, finished and long
// terminating pods), must be moved (evicted and rescheduled elsewhere), or
// blocks the removal. Each rule lives in its own file with its reason, and
// the rules run in a fixed order, the first that decides wins, as Cluster
// Autoscaler's drainability chain does (its annotations are honoured, so
// that users can switch without relabelling; where berth differs, the
// rule's comment says why). Pure: API types in, verdicts out.
//
// The chain, in order:
//
//	DoNotDisrupt        berth's, Karpenter's and Ocean's opt-outs on a running pod, of any kind: Blocks
//	GoesWithNode        DaemonSet (or annotated daemonset-pod), mirror, finished, long terminating: Stays
//	Terminating         a pod being deleted, not long terminating yet: Moves (it leaves anyway; none of the rules below apply)
//	ControllerExists    a pod whose ReplicaSet, Job, StatefulSet or ReplicationController is gone: Blocks
//	SafeToEvict         safe-to-evict "true": Moves (budgets still apply); "false", "on-completion": Blocks
//	NotReplicated       a pod without a controller: Blocks
//	LocalStorage        emptyDir on disk or hostPath not listed in safe-to-evict-local-volumes: Blocks
//	SystemPodWithoutPDB a kube-system pod no PodDisruptionBudget covers: Blocks
//	DisruptionBudget    a pod whose budget allows no disruption now (and that the Eviction API does not evict freely): Blocks
package drain

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// Finishes says the pod blocks only until it finishes on its own
	// (safe-to-evict: on-completion): its node waits for it.
	Finishes bool
}

// Context is what rules may consult besides the pod.
type Context struct {
	// PDBs are the cluster's PodDisruptionBudgets with the disruptions
	// each still allows in this round.
	PDBs *Budgets
	// Now tells how long a pod has been terminating; zero turns the long
	// terminating check off (offline plans of hand-written inputs).
	Now time.Time
	// Controllers are the UIDs of the ReplicaSets, Jobs, StatefulSets,
	// ReplicationControllers and DaemonSets that exist; nil when not known
	// (the check that a pod's controller exists is then off).
	Controllers map[types.UID]bool
}

// Rule is one drainability rule.
type Rule interface {
	Name() Reason
	Check(p *corev1.Pod, c *Context) Outcome
}

// Rules is the chain, in order.
func Rules() []Rule {
	return []Rule{
		DoNotDisrupt{},
		GoesWithNode{},
		Terminating{},
		ControllerExists{},
		SafeToEvict{},
		NotReplicated{},
		LocalStorage{},
		SystemPodWithoutPDB{},
		DisruptionBudget{},
	}
}

// Check runs the chain on a pod; a pod no rule decides on moves.
func Check(rules []Rule, p *corev1.Pod, c *Context) Outcome {
	if c == nil {
		c = &Context{}
	}
	for _, r := range rules {
		if o := r.Check(p, c); o.Verdict != Undecided {
			return o
		}
	}
	return Outcome{Verdict: Moves}
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Annotations of Cluster Autoscaler that berth honours.
const (
	annotationSafeToEvict             = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	annotationSafeToEvictLocalVolumes = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
)
