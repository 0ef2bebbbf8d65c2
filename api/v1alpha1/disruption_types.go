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
	ConsolidateAfter *metav1.Duration `json:"consolidateAfter,omitempty"`
	// Budget is how many of the group's nodes may be disrupted at once: a
	// count ("2") or a percentage of the group's nodes ("10%", the
	// default), rounded up, at least 1.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="budget must be a count or a percentage such as \"10%\""
	// +optional
	Budget *intstr.IntOrString `json:"budget,omitempty"`
	// DrainTimeout is how long berth waits for the pods of a node to be
	// evicted (PodDisruptionBudgets may make it wait) before it gives the
	// removal up and untaints the node (default 300s).
	// +optional
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
}

// DisruptionWindow is a recurring time window, UTC.
type DisruptionWindow struct {
	// Cron is when the window opens: a standard 5-field expression in UTC
	// (e.g. "0 22 * * 1-5") or a descriptor such as @daily.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^\\\\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([0-9*/,?A-Za-z-]+\\\\s+){4}[0-9*/,?A-Za-z-]+)\\\\s*$')",message="cron must be a 5-field expression such as \"0 22 * * 1-5\" or a descriptor such as @daily"
	// +required
	Cron string `json:"cron"`
	// Duration the window stays open.
	// +required
	Duration metav1.Duration `json:"duration"`
}
