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
	// ReasonAllUnitsReady, ReasonUnitsMissing, ReasonInvalidSpec,
	// ReasonForbidden (berth may not create what the Headroom needs: its
	// RBAC or an admission policy refused it) and
	// ReasonPlaceholdersNotCreated (the placeholder Deployment's pods are
	// refused: a PriorityClass missing, a quota or LimitRange of
	// berth-system) are the reasons of the Ready condition.
	ReasonAllUnitsReady          = "AllUnitsReady"
	ReasonUnitsMissing           = "UnitsMissing"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonForbidden              = "Forbidden"
	ReasonPlaceholdersNotCreated = "PlaceholdersNotCreated"
	// ConditionTargetMet is True when the pods in scope got capacity
	// within the target's wait, at its percent, over the last hour.
	ConditionTargetMet = "TargetMet"
	// ReasonTargetMet, ReasonTargetMissed and ReasonTargetNoPods are its
	// reasons.
	ReasonTargetMet    = "TargetMet"
	ReasonTargetMissed = "TargetMissed"
	ReasonTargetNoPods = "NoPods"
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
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="name must be at most 63 characters: berth labels the Headroom's placeholder pods, node reserve and learned history with it, and label values are at most 63 characters"
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredUnits`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyUnits`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target.phase`
// +kubebuilder:printcolumn:name="Standby",type=integer,JSONPath=`.status.standby.units`
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
// +kubebuilder:validation:XValidation:rule="has(self.units) || has(self.automatic) || has(self.perNode) || has(self.target) || has(self.standby) || (has(self.schedules) && size(self.schedules) > 0)",message="set at least one of units, automatic, schedules, target, standby or perNode"
// +kubebuilder:validation:XValidation:rule="!has(self.standby) || has(self.units) || (has(self.automatic) && has(self.automatic.unit))",message="standby needs the unit shape: set units (count 0 keeps no running units) or automatic.unit"
// +kubebuilder:validation:XValidation:rule="!has(self.target) || has(self.units) || has(self.automatic)",message="target needs the unit shape and the units to keep while berth learns: set units (or automatic)"
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

	// Target is a wait-time goal: berth learns from the bursts it sees in
	// scope how much capacity arrives within one node-launch time, and
	// keeps the units that would have held the goal's share of it. While
	// it has too little history, the units of spec.units and automatic
	// (and an active schedule) are kept, as without a target; once it
	// knows, the target's units replace them, an active schedule's count
	// is a floor, and minUnits, maxUnits and maxCostPerHour bound them.
	// The unit shape is spec.units' (else automatic.unit's).
	// +optional
	Target *HeadroomTarget `json:"target,omitempty"`

	// Standby keeps units on suspended machines (the standby tier): berth
	// launches nodes of the scope's node groups for them, suspends each
	// once it is Ready (it then costs its offering's stoppedPricePerHour),
	// and resumes one instead of launching a new node when pending pods
	// or running headroom need a node of its offering; it then launches
	// another to keep the count. A resume takes the group's resume delay,
	// shorter than a launch. The unit shape is spec.units' (else
	// automatic.unit's). Needs a provider that can suspend (kwok).
	// +optional
	Standby *StandbyHeadroom `json:"standby,omitempty"`
}

// StandbyHeadroom is headroom kept on suspended machines.
type StandbyHeadroom struct {
	// Count of units kept on suspended standby nodes.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +required
	Count int32 `json:"count"`
}

// StandbyStatus is the state of a Headroom's standby tier.
type StandbyStatus struct {
	// DesiredUnits is spec.standby.count.
	DesiredUnits int32 `json:"desiredUnits"`
	// Units the suspended standby nodes hold.
	Units int32 `json:"units"`
	// Nodes that are suspended.
	Nodes int32 `json:"nodes"`
	// Booting standby nodes, launched and not suspended yet.
	// +optional
	Booting int32 `json:"booting,omitempty"`
	// CostPerHour of the standby nodes (their stopped price; booting
	// nodes at their running price), a decimal number.
	// +optional
	CostPerHour string `json:"costPerHour,omitempty"`
	// Message says what berth does about the standby tier and why.
	// +optional
	Message string `json:"message,omitempty"`
}

// HeadroomTarget is a goal for the wait for capacity of the pods in
// scope: Percent of them should get capacity within Wait.
// +kubebuilder:validation:XValidation:rule="!has(self.minUnits) || !has(self.maxUnits) || self.minUnits <= self.maxUnits",message="minUnits must not exceed maxUnits"
type HeadroomTarget struct {
	// Wait is the longest a pod should wait for capacity (from its
	// creation to its binding, when its first scheduling attempt found no
	// room), e.g. 5s. A wait as long as a node launch needs no headroom.
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="wait must be a duration such as 5s or 2m (units h, m, s, ms; not negative)"
	Wait metav1.Duration `json:"wait"`
	// Percent of the pods in scope that should get capacity within Wait:
	// 50 to 100.
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=95
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// PodSelector counts only the pods with these labels (a workload) in
	// the demand and the measured wait. Default: every workload pod in
	// scope.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// MinUnits is a floor on the units the target keeps.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinUnits *int32 `json:"minUnits,omitempty"`
	// MaxUnits is a ceiling on the units the target keeps.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxUnits *int32 `json:"maxUnits,omitempty"`
	// MaxCostPerHour caps the hourly price of the room the units hold,
	// counted at the cheapest price per unit the scope's node groups
	// offer, e.g. "2.50".
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=20
	// +optional
	MaxCostPerHour string `json:"maxCostPerHour,omitempty"`
	// History is how far back bursts count: a burst's weight halves
	// every half of it. 1h to 2160h (90 days), default 168h (a week).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('2160h')",message="history must be between 1h and 2160h (90 days)"
	// +optional
	History *metav1.Duration `json:"history,omitempty"`
	// Shapes says which shapes the target keeps units of. Learned (the
	// default): pods that need more than one unit of the Headroom's
	// shape are learned apart by their own request shape (at most three
	// shapes besides the unit), and the target keeps units of each shape
	// that bursts, so that such a pod finds its room on one node
	// (status.learnedUnits). Unit: every pod counts in units of the
	// Headroom's one shape.
	// +kubebuilder:validation:Enum=Learned;Unit
	// +optional
	Shapes TargetShapes `json:"shapes,omitempty"`
}

// TargetShapes says which shapes a target keeps units of.
type TargetShapes string

// Values of spec.target.shapes.
const (
	// TargetShapesLearned: the unit's shape and the shapes of the pods
	// larger than a unit that burst.
	TargetShapesLearned TargetShapes = "Learned"
	// TargetShapesUnit: the unit's shape only.
	TargetShapesUnit TargetShapes = "Unit"
)

// LearnsShapes reports whether a target learns the shapes of the pods
// larger than a unit (spec.target.shapes Learned, the default).
func (t *HeadroomTarget) LearnsShapes() bool {
	return t != nil && t.Shapes != TargetShapesUnit
}

// LearnedUnits are units of a shape berth learned from the pods that
// burst.
type LearnedUnits struct {
	// Resources one unit of the shape requests (the pods' requests).
	// +required
	Resources corev1.ResourceList `json:"resources"`
	// Count of units of the shape.
	// +required
	Count int32 `json:"count"`
}

// Target phases in status.
const (
	// TargetLearning: the history is too short; the fallback units apply.
	TargetLearning = "Learning"
	// TargetSized: the units come from the history.
	TargetSized = "Sized"
	// TargetCapped: the history asks for more than maxUnits or
	// maxCostPerHour allow.
	TargetCapped = "Capped"
)

// HeadroomTargetStatus says how berth sizes a Headroom with a target and
// whether the goal is met.
type HeadroomTargetStatus struct {
	// Phase: Learning, Sized or Capped.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Units the target asks for now (before minUnits and maxUnits).
	// +optional
	Units int32 `json:"units"`
	// Message explains the units, e.g. "95 % of the demand in 45 s
	// windows of Mon 09:00 is within 4 units of 1 cpu: keeping 4".
	// +optional
	Message string `json:"message,omitempty"`
	// Window is the node-launch time the demand is counted in.
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
	// LearningSince is when the history started; Windows how many
	// windows it has seen, Bursts how many of them had demand.
	// +optional
	LearningSince *metav1.Time `json:"learningSince,omitempty"`
	// +optional
	Windows int64 `json:"windows,omitempty"`
	// +optional
	Bursts int64 `json:"bursts,omitempty"`
	// LastHour and LastDay are the measured waits of the pods in scope.
	// +optional
	LastHour *MeasuredWait `json:"lastHour,omitempty"`
	// +optional
	LastDay *MeasuredWait `json:"lastDay,omitempty"`
	// CostPerHour of the room the desired units hold, at the cheapest
	// price per unit in scope.
	// +optional
	CostPerHour string `json:"costPerHour,omitempty"`
}

// MeasuredWait is the wait for capacity of the pods in scope over a
// period, against the target.
type MeasuredWait struct {
	// Pods that got capacity in the period.
	Pods int64 `json:"pods"`
	// WithinPercent is the share of them (percent) that waited at most
	// the target's wait.
	WithinPercent string `json:"withinPercent"`
	// Quantile is the wait at the target's percent, e.g. "3.2s".
	Quantile string `json:"quantile"`
	// Met is true when WithinPercent reaches the target's percent.
	Met bool `json:"met"`
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
	// of the workload pods in scope; the shape in status.unit stays while
	// its pods are at least 4/5 as many as the most common shape's.
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
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="duration must be a duration such as 30m or 8h (units h, m, s, ms; not negative)"
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
	// LearnedUnits are the part of desiredUnits kept in shapes learned
	// from the pods in scope larger than one unit (spec.target.shapes
	// Learned): desiredUnits less their counts are units of status.unit.
	// They take status.unit's tolerations and node selector, and are
	// kept in berth's plans (not by placeholder pods).
	// +kubebuilder:validation:MaxItems=3
	// +listType=atomic
	// +optional
	LearnedUnits []LearnedUnits `json:"learnedUnits,omitempty"`
	// ActiveSchedule names the schedule window in effect, if any.
	// +optional
	ActiveSchedule string `json:"activeSchedule,omitempty"`
	// ReservedNodes is how many nodes hold the per-node reserve.
	// +optional
	ReservedNodes int32 `json:"reservedNodes,omitempty"`
	// Target is how berth sizes the headroom for spec.target and whether
	// the goal is met.
	// +optional
	Target *HeadroomTargetStatus `json:"target,omitempty"`
	// Standby is the state of the standby tier, when spec.standby is set.
	// +optional
	Standby *StandbyStatus `json:"standby,omitempty"`
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
