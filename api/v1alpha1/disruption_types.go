package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ConsolidationPolicy says which nodes berth may remove.
// +kubebuilder:validation:Enum=WhenEmpty;WhenEmptyOrUnderutilized;Never
type ConsolidationPolicy string

// The consolidation policies.
const (
	// ConsolidationWhenEmpty removes only nodes without workload pods.
	ConsolidationWhenEmpty ConsolidationPolicy = "WhenEmpty"
	// ConsolidationWhenEmptyOrUnderutilized also removes nodes whose pods
	// all fit on the other nodes.
	ConsolidationWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationNever turns scale-down off for the group.
	ConsolidationNever ConsolidationPolicy = "Never"
)

// Disruption tunes scale-down of a node group.
type Disruption struct {
	// ConsolidationPolicy is WhenEmptyOrUnderutilized (default), WhenEmpty
	// or Never.
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// ConsolidateAfter is how long a node must have been removable before
	// berth removes it (default 30s).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="consolidateAfter must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	ConsolidateAfter *metav1.Duration `json:"consolidateAfter,omitempty"`
	// Budget is how many of the group's nodes may be disrupted at once: a
	// count ("2") or a percentage of the group's nodes ("10%", the
	// default), rounded up. 0 or "0%" disrupts nothing but interrupted
	// nodes and, one at a time, the nodes of a NodeGroup being deleted.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%?$')",message="budget must be a count or a percentage such as \"10%\""
	// +optional
	Budget *intstr.IntOrString `json:"budget,omitempty"`
	// DrainTimeout is how long berth waits for the pods of a node to be
	// evicted (PodDisruptionBudgets may make it wait) before it gives the
	// removal up and untaints the node (default 300s). Pods evicted and
	// shutting down are waited for past it, each until it is long
	// terminating as Cluster Autoscaler counts it (30s past its deletion
	// timestamp plus its termination grace period: the API server's
	// deletion timestamp already adds the grace period once), and the
	// removal then has drainTimeout again.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="drainTimeout must be a positive duration such as 300s or 5m (units h, m, s, ms)"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
	// ReplaceSavingsPercent: under WhenEmptyOrUnderutilized, berth replaces
	// up to three nodes whose pods fit on the other nodes plus one new node
	// by that node when it costs at least this many percent less than they
	// do (default 10, to avoid churn; unset or 0 means the default). The
	// new node is Ready before the old ones are drained.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ReplaceSavingsPercent int32 `json:"replaceSavingsPercent,omitempty"`
	// Window limits when berth starts removals in the group (for example
	// only outside business hours); drains already started go on. Without
	// it, at any time.
	// +optional
	Window *DisruptionWindow `json:"window,omitempty"`
	// Budgets lower Budget for some reasons, optionally in a window
	// ("no drift replacements during business hours"). The lowest budget
	// that applies to a reason now wins; Budget is always the ceiling.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []DisruptionBudget `json:"budgets,omitempty"`
	// ExpireAfter replaces nodes older than this (off when unset), spread
	// over up to a tenth of it (at most an hour) so that a fleet launched
	// together does not expire at once; through the same path as
	// scale-down (replacement first, budget, PodDisruptionBudgets).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="expireAfter must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	ExpireAfter *metav1.Duration `json:"expireAfter,omitempty"`
	// Interruption: the signals of a cloud taking a node back, and whether
	// rebalance recommendations are acted on. A node under notice is
	// replaced at once and drained within its notice.
	// +optional
	Interruption *Interruption `json:"interruption,omitempty"`
	// Repair, when set, replaces nodes that stay unhealthy (off when
	// unset); never more than MaxUnhealthyPercent of the group at once.
	// +optional
	Repair *Repair `json:"repair,omitempty"`
}

// DisruptionWindow is a recurring time window, UTC.
type DisruptionWindow struct {
	// Cron is when the window opens: a standard 5-field expression in UTC
	// (e.g. "0 22 * * 1-5") or a descriptor such as @daily.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^\\\\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([0-9*/,?A-Za-z-]+\\\\s+){4}[0-9*/,?A-Za-z-]+)\\\\s*$')",message="cron must be a 5-field expression such as \"0 22 * * 1-5\" or a descriptor such as @daily"
	// +required
	Cron string `json:"cron"`
	// Duration the window stays open (more than 0s: a window of 0s never
	// opens, and no removal would ever start).
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="duration must be a positive duration such as 30s, 10m or 8h (units h, m, s, ms): a window of 0s never opens"
	Duration metav1.Duration `json:"duration"`
}

// DisruptionReason is why berth disrupts a node.
// +kubebuilder:validation:Enum=Empty;Underutilized;Drifted;Expired;Interrupted;Unhealthy
type DisruptionReason string

// Why berth disrupts nodes.
const (
	// ReasonEmpty: no pod of the node needs a new home.
	ReasonEmpty DisruptionReason = "Empty"
	// ReasonUnderutilized: the node's pods fit on the other nodes (or on
	// one cheaper node).
	ReasonUnderutilized DisruptionReason = "Underutilized"
	// ReasonDrifted: the group's spec no longer describes the node.
	ReasonDrifted DisruptionReason = "Drifted"
	// ReasonExpired: the node is older than the group's expireAfter.
	ReasonExpired DisruptionReason = "Expired"
	// ReasonInterrupted: the cloud announced it takes the node back.
	ReasonInterrupted DisruptionReason = "Interrupted"
	// ReasonUnhealthy: the node has been unhealthy past its toleration
	// (repair, opt-in).
	ReasonUnhealthy DisruptionReason = "Unhealthy"
)

// DisruptionBudget lowers, for some reasons and optionally in a window,
// how many of the group's nodes may be disrupted at once. Nodes disrupted
// for any reason count against every budget.
// +kubebuilder:validation:XValidation:rule="has(self.schedule) == has(self.duration)",message="set schedule and duration together"
// +kubebuilder:validation:XValidation:rule="type(self.nodes) != int || self.nodes >= 0",message="nodes must not be negative"
type DisruptionBudget struct {
	// Nodes is a count ("0" stops these disruptions) or a percentage of
	// the group's nodes, rounded up.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +required
	Nodes intstr.IntOrString `json:"nodes"`
	// Reasons the budget applies to; all when empty.
	// +kubebuilder:validation:MaxItems=6
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Schedule is when the budget starts to apply: a 5-field cron
	// expression in UTC or a descriptor (@daily); with Duration. Without
	// them it always applies. Interruptions ignore schedules (the cloud
	// does not wait).
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^\\\\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([0-9*/,?A-Za-z-]+\\\\s+){4}[0-9*/,?A-Za-z-]+)\\\\s*$')",message="schedule must be a 5-field expression such as \"0 9 * * 1-5\" or a descriptor such as @daily"
	// +optional
	Schedule string `json:"schedule,omitempty"`
	// Duration the budget applies from each time of Schedule (more than
	// 0s: a budget of 0s never applies).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="duration must be a positive duration such as 30s, 10m or 8h (units h, m, s, ms): a budget of 0s never applies"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// Interruption says which signals announce that the cloud takes a node
// back, and what berth does about them.
type Interruption struct {
	// Taints whose presence on a node is an interruption notice. Default:
	// AWS Node Termination Handler's aws-node-termination-handler/spot-itn,
	// /scheduled-maintenance and /asg-lifecycle-termination, GKE's
	// cloud.google.com/impending-node-termination, the cloud controller
	// manager's node.cloudprovider.kubernetes.io/shutdown (the instance is
	// stopped), and berth.dev/interruption (the KWOK provider's, and any
	// termination handler that writes it).
	// +kubebuilder:validation:MaxItems=20
	// +listType=set
	// +optional
	Taints []string `json:"taints,omitempty"`
	// Conditions: node condition types whose status True is a notice.
	// +kubebuilder:validation:MaxItems=20
	// +listType=set
	// +optional
	Conditions []string `json:"conditions,omitempty"`
	// Rebalance, when true, also replaces nodes that get a rebalance
	// recommendation (an earlier, softer signal: AWS Node Termination
	// Handler's aws-node-termination-handler/rebalance-recommendation
	// taint), ahead of time, within the Drifted budget.
	// +optional
	Rebalance bool `json:"rebalance,omitempty"`
	// NoticePeriod is how long after a notice the node goes when the
	// signal does not say (annotation berth.dev/interruption-deadline);
	// default 2m, and 1h for a maintenance notice (/scheduled-maintenance,
	// /asg-lifecycle-termination), whose node drains within its
	// PodDisruptionBudgets meanwhile.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="noticePeriod must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	NoticePeriod *metav1.Duration `json:"noticePeriod,omitempty"`
}

// Repair turns on the replacement of unhealthy nodes.
type Repair struct {
	// Conditions that make a node unhealthy once they have held for their
	// toleration. Default: Ready False or Unknown for 10 minutes.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Conditions []RepairCondition `json:"conditions,omitempty"`
	// MaxUnhealthyPercent: when more of the group's nodes than this
	// percentage, rounded up (one node of a group of up to five at 20), fail
	// a repair condition at once (for however long: a partition takes
	// nodes down together), berth repairs none (a partition is not a
	// repair); default 20. Nor does any group repair while more than 20 %
	// of the nodes of the groups that repair fail a repair condition.
	// Nodes never seen Ready are the launch timeout's, not repair's.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxUnhealthyPercent *int32 `json:"maxUnhealthyPercent,omitempty"`
}

// RepairCondition is a node condition that makes a node unhealthy.
type RepairCondition struct {
	// Type of the node condition.
	// +kubebuilder:validation:MaxLength=316
	// +required
	Type string `json:"type"`
	// Status that is unhealthy (True, False or Unknown).
	// +kubebuilder:validation:Enum=True;False;Unknown
	// +required
	Status string `json:"status"`
	// Toleration is how long the condition must have held.
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="toleration must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	Toleration metav1.Duration `json:"toleration"`
}
