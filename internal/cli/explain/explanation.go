package explain

import (
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// Explanation is what `berth explain` says about one pod or node. `-o
// json` and `-o yaml` print it as is: its fields are a stable contract
// (new ones may be added, none is renamed or changes meaning).
type Explanation struct {
	// Kind is "Pod" or "Node".
	Kind string `json:"kind"`
	// Name is "namespace/name" for a pod, the name for a node.
	Name string `json:"name"`
	// Decision is what berth's planner decides now (see Decision).
	Decision Decision `json:"decision"`
	// Reason is the rule behind the decision, in the words of berth's
	// events, node conditions and metrics: a drain rule (NotReplicated,
	// PodDisruptionBudget, ...), a group rule (MinSize,
	// DisruptionBudget, ...), a disruption reason (Drifted, Empty, ...),
	// or for a pod TriggeredScaleUp / NotTriggerScaleUp. Empty when there
	// is none.
	Reason string `json:"reason,omitempty"`
	// Message says the decision and its rule in words.
	Message string `json:"message"`
	// NodeGroup is the node group the decision concerns: the node's, or
	// that of the node the pod would get.
	NodeGroup string `json:"nodeGroup,omitempty"`
	// Node is the node a pod is bound to, fits on or is nominated to.
	Node string `json:"node,omitempty"`
	// Pod ("namespace/name") is the pod that keeps a node.
	Pod string `json:"pod,omitempty"`
	// Launch are the nodes berth would launch: for the pod, or first, to
	// take a node's pods (disruption, replacement).
	Launch []Launch `json:"launch,omitempty"`
	// Evict are the pods a node's removal evicts, each with the node the
	// plan found for it (empty when they wait for another group's node).
	Evict []Move `json:"evict,omitempty"`
	// NodeGroups say, for a pod no node group can host, why each cannot.
	NodeGroups []GroupVerdict `json:"nodeGroups,omitempty"`
	// Hints say what the user can change to get a different outcome.
	Hints []string `json:"hints,omitempty"`
	// Live is what the running controller did or shows on the objects:
	// its latest event on the pod, the pod's nomination and scheduling
	// condition, the node's drain taint and annotations, its
	// BerthDisruption condition, its group's ScaleDownSuspended.
	Live []string `json:"live,omitempty"`
	// Notes say what this command cannot know from outside the
	// controller, where it could change the outcome.
	Notes []string `json:"notes,omitempty"`
}

// Decision is berth's decision about a pod or a node.
type Decision string

// Decisions about a pod.
const (
	// DecisionLaunchNode: berth launches a node for the pod (Launch[0]).
	DecisionLaunchNode Decision = "LaunchNode"
	// DecisionFitsExistingNode: the pod fits a node that exists or is
	// being launched (Node): no new node.
	DecisionFitsExistingNode Decision = "FitsExistingNode"
	// DecisionNoNodeGroupFits: no node and no node group can host the pod
	// (NodeGroups say why).
	DecisionNoNodeGroupFits Decision = "NoNodeGroupFits"
	// DecisionNominated: the pod waits for the node it is nominated to.
	DecisionNominated Decision = "Nominated"
	// DecisionBound: the pod is on a node.
	DecisionBound Decision = "Bound"
	// DecisionNotPlanned: berth does not plan the pod (finished, being
	// deleted, a DaemonSet pod, held by another scheduling gate).
	DecisionNotPlanned Decision = "NotPlanned"
)

// Decisions about a node.
const (
	// DecisionRemove: the node is removable now (Reason Empty,
	// Underutilized or NodeGroupDeleted; Evict its pods).
	DecisionRemove Decision = "Remove"
	// DecisionReplace: the node goes with others for one cheaper node
	// (Launch[0]).
	DecisionReplace Decision = "Replace"
	// DecisionDisrupt: the node's life takes it out (Reason Interrupted,
	// Drifted, Expired, Unhealthy), after Launch when its pods fit
	// nowhere else.
	DecisionDisrupt Decision = "Disrupt"
	// DecisionKeep: the node stays; Reason is the rule.
	DecisionKeep Decision = "Keep"
	// DecisionDraining: berth is draining the node already.
	DecisionDraining Decision = "Draining"
	// DecisionReplacing: berth launched a node to replace this one and
	// drains it once that node is Ready.
	DecisionReplacing Decision = "Replacing"
	// DecisionDeleting: the node is being deleted.
	DecisionDeleting Decision = "Deleting"
	// DecisionNotManaged: berth does not manage the node.
	DecisionNotManaged Decision = "NotManaged"
)

// Reasons this command gives that no planner does (the node or pod never
// reaches a planner's rules).
const (
	ReasonNoNodeGroup      = "NoNodeGroup"
	ReasonNodeGroupMissing = "NodeGroupNotFound"
	ReasonNotReady         = "NotReady"
	ReasonStandby          = "Standby"
	ReasonReplacement      = "Replacement"
	ReasonFinished         = "Finished"
	ReasonDeleting         = "Deleting"
	ReasonRemovalAccepted  = "RemovalAccepted"
	ReasonDaemonSetPod     = "DaemonSetPod"
	ReasonSchedulingGated  = "SchedulingGated"
)

// Launch is a node berth would launch.
type Launch struct {
	NodeGroup    string  `json:"nodeGroup"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
	// Pods ("namespace/name") the plan puts on it.
	Pods []string `json:"pods,omitempty"`
}

// Move is a pod evicted from a node and where it fits.
type Move struct {
	Pod string `json:"pod"`
	To  string `json:"to,omitempty"`
}

// GroupVerdict is why one node group cannot host a pod.
type GroupVerdict struct {
	NodeGroup string `json:"nodeGroup"`
	// Reason is the planner's, as on the pod's NotTriggerScaleUp event
	// ("node group at maxSize 3", "untolerated taint size=large:NoSchedule").
	Reason string `json:"reason"`
}

func launchOf(n scaleup.NewNode) Launch {
	l := Launch{NodeGroup: n.NodeGroup, InstanceType: n.InstanceType, Zone: n.Zone, CapacityType: n.CapacityType, PricePerHour: n.PricePerHour}
	for _, p := range n.Pods {
		l.Pods = append(l.Pods, p.String())
	}
	return l
}

func launchesOf(nodes []scaleup.NewNode) []Launch {
	out := make([]Launch, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, launchOf(n))
	}
	return out
}

func movesOf(evict []scaledown.Move) []Move {
	out := make([]Move, 0, len(evict))
	for _, m := range evict {
		out = append(out, Move{Pod: m.Pod.String(), To: m.To})
	}
	return out
}
