package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HeadroomCombine says how manual and automatic units add up.
// +kubebuilder:validation:Enum=Sum;Max
type HeadroomCombine string

const (
	// CombineSum keeps manual plus automatic units.
	CombineSum HeadroomCombine = "Sum"
	// CombineMax keeps the larger of manual and automatic units.
	CombineMax HeadroomCombine = "Max"
)

// Headroom condition types and reasons.
const (
	// ConditionReady is True when every desired unit fits in free capacity.
	ConditionReady = "Ready"
	// ReasonAllUnitsReady, ReasonUnitsMissing and ReasonInvalidSpec are
	// the reasons of the Ready condition.
	ReasonAllUnitsReady = "AllUnitsReady"
	ReasonUnitsMissing  = "UnitsMissing"
	ReasonInvalidSpec   = "InvalidSpec"
	// ConditionSpecProblems is True when berth ignores part of the spec (a
	// schedule that never fires) or keeps fewer units than it asks for
	// (more than the per-headroom maximum); the message says what.
	ConditionSpecProblems = "SpecProblems"
	// ReasonSpecIgnored and ReasonNoProblems are its reasons.
	ReasonSpecIgnored = "SpecIgnored"
	ReasonNoProblems  = "NoProblems"
)

// Headroom keeps spare capacity ready before pods ask for it: a number of
// units (each a shape of cpu, memory, devices) that must fit in free
// capacity, cluster-wide or within some node groups. Missing units make
// berth launch nodes. Optionally the units are held by real low-priority
// placeholder pods, and a slice of every selected node can be reserved for
// burst-critical pods.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=hr,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredUnits`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyUnits`
// +kubebuilder:printcolumn:name="Placeholders",type=boolean,JSONPath=`.spec.placeholders`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Headroom struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HeadroomSpec `json:"spec"`
	// +optional
	Status HeadroomStatus `json:"status,omitempty"`
}

// HeadroomSpec is the headroom to keep.
//
// +kubebuilder:validation:XValidation:rule="has(self.units) || has(self.automatic) || has(self.perNode) || (has(self.schedules) && size(self.schedules) > 0)",message="set at least one of units, automatic, schedules or perNode"
type HeadroomSpec struct {
	// Scope limits where the units must fit: in the node groups named or
	// selected here (a unit of a node group tolerates its taints). Empty
	// means anywhere in the cluster.
	// +optional
	Scope HeadroomScope `json:"scope,omitempty"`

	// Units is a manual amount of headroom: count units of one shape.
	// +optional
	Units *HeadroomUnits `json:"units,omitempty"`

	// Automatic sizes the headroom as a percentage of what the workload
	// pods running in scope request.
	// +optional
	Automatic *AutomaticHeadroom `json:"automatic,omitempty"`

	// Combine says how manual and automatic units add up when both are
	// set: Sum (manual + automatic, the default) or Max (the larger).
	// +kubebuilder:default=Sum
	// +optional
	Combine HeadroomCombine `json:"combine,omitempty"`

	// Schedules are time windows with their own number of units, e.g. more
	// headroom on weekday mornings. While a window is active its count
	// replaces the manual count (the shape is the window's, else the manual
	// units' shape); automatic units still combine with it.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Schedules []HeadroomSchedule `json:"schedules,omitempty"`

	// Placeholders holds the units with real pause pods, one per unit, of
	// the low PriorityClass berth-headroom: the scheduler keeps the space
	// too, and any real pod preempts them. A preempted placeholder goes
	// pending and makes berth restore the headroom.
	// +optional
	Placeholders bool `json:"placeholders,omitempty"`

	// PerNode reserves a slice of every selected node for burst-critical
	// pods (PriorityClass berth-burst-critical).
	// +optional
	PerNode *PerNodeReserve `json:"perNode,omitempty"`
}

// HeadroomScope selects node groups.
type HeadroomScope struct {
	// NodeGroups by name.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	NodeGroups []string `json:"nodeGroups,omitempty"`
	// NodeGroupSelector selects node groups by their labels.
	// +optional
	NodeGroupSelector *metav1.LabelSelector `json:"nodeGroupSelector,omitempty"`
}

// UnitShape is what one unit of headroom requests and where it may land.
type UnitShape struct {
	// Resources one unit requests, e.g. cpu: "1", memory: 1Gi,
	// nvidia.com/gpu: "1".
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="a unit must request at least one resource (cpu, memory or a device)"
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Tolerations of a unit, for nodes with taints outside the scope's.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of a unit.
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// HeadroomUnits is a number of units of one shape.
// +kubebuilder:validation:XValidation:rule="has(self.resources)",message="units.resources is required: a unit must request at least one resource (cpu, memory or a device)"
type HeadroomUnits struct {
	// Count of units.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +required
	Count int32 `json:"count"`
	// UnitShape of each unit.
	UnitShape `json:",inline"`
}

// AutomaticHeadroom is headroom as a share of the workload.
type AutomaticHeadroom struct {
	// Percentage of the resources requested by the running workload pods in
	// scope (DaemonSet and placeholder pods excluded), 0 to 200. The number
	// of units is the total divided by the unit shape, rounded up, for the
	// resource that needs the most units.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	// +required
	Percentage int32 `json:"percentage"`
	// Unit is the shape of one unit. Default: the most common request shape
	// of the workload pods in scope.
	// +optional
	Unit *UnitShape `json:"unit,omitempty"`
}

// HeadroomSchedule is a time window with its own units.
type HeadroomSchedule struct {
	// Name of the window, shown in status.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// Cron is when the window starts, a standard 5-field expression in UTC
	// (minute hour day-of-month month day-of-week, e.g. "0 8 * * 1-5") or a
	// descriptor such as @daily.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^\\\\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([0-9*/,?A-Za-z-]+\\\\s+){4}[0-9*/,?A-Za-z-]+)\\\\s*$')",message="cron must be a 5-field expression such as \"0 8 * * 1-5\" or a descriptor such as @daily"
	// +required
	Cron string `json:"cron"`
	// Duration of the window.
	// +required
	Duration metav1.Duration `json:"duration"`
	// Units during the window. Without resources, the shape of spec.units.
	// +required
	Units ScheduleUnits `json:"units"`
}

// ScheduleUnits is the count and optional shape of a schedule's units.
type ScheduleUnits struct {
	// Count of units while the window is active.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +required
	Count int32 `json:"count"`
	// UnitShape of each unit; empty means the shape of spec.units.
	UnitShape `json:",inline"`
}

// PerNodeReserve is a slice of each selected node held for burst-critical
// pods by a DaemonSet of pause pods (PriorityClass berth-node-reserve).
type PerNodeReserve struct {
	// NodeSelector selects the nodes to reserve on; empty means all.
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the reserve run on tainted nodes.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Resources reserved on each node.
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="perNode.resources must reserve at least one resource"
	// +required
	Resources corev1.ResourceList `json:"resources"`
}

// HeadroomStatus is the observed state of a Headroom.
type HeadroomStatus struct {
	// ObservedGeneration is the generation this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DesiredUnits is how many units berth keeps.
	// +optional
	DesiredUnits int32 `json:"desiredUnits"`
	// ReadyUnits is how many of them fit in free capacity of Ready nodes
	// now (with placeholders: how many placeholder pods run).
	// +optional
	ReadyUnits int32 `json:"readyUnits"`
	// Unit is the shape of a unit berth uses (resolved for automatic
	// headroom and schedules).
	// +optional
	Unit *UnitShape `json:"unit,omitempty"`
	// ActiveSchedule names the schedule window in effect, if any.
	// +optional
	ActiveSchedule string `json:"activeSchedule,omitempty"`
	// ReservedNodes is how many nodes hold the per-node reserve.
	// +optional
	ReservedNodes int32 `json:"reservedNodes,omitempty"`
	// Conditions: Ready, SpecProblems.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// HeadroomList is a list of Headrooms.
//
// +kubebuilder:object:root=true
type HeadroomList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Headroom `json:"items"`
}
