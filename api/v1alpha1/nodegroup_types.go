package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityType says how a node is bought: spot capacity can be reclaimed by
// the provider and is cheaper; on-demand capacity cannot.
// +kubebuilder:validation:Enum=spot;on-demand
type CapacityType string

const (
	// CapacityTypeSpot is interruptible capacity.
	CapacityTypeSpot CapacityType = "spot"
	// CapacityTypeOnDemand is regular capacity.
	CapacityTypeOnDemand CapacityType = "on-demand"
)

// NodeGroup condition types.
const (
	// ConditionLaunchFailing is True while launches of at least one of the
	// group's offerings fail; the message names the offerings.
	ConditionLaunchFailing = "LaunchFailing"
	// ConditionScaleDownSuspended is True while berth does not remove nodes of
	// the group (for example after repeated launch failures).
	ConditionScaleDownSuspended = "ScaleDownSuspended"
)

// NodeGroup is a set of nodes that share one template and a list of instance
// types and offerings to launch them from. berth picks the cheapest mix of
// instance types, zones and capacity types that fits the pending pods, within
// the group's size and resource limits; an empty group (minSize 0) still
// scales up from its template.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ng;ngs,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minSize`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxSize`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 57",message="name must be at most 57 characters: nodes are named <name>-<5 characters> and carry that name in the kubernetes.io/hostname label, whose values are at most 63 characters"
type NodeGroup struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeGroupSpec `json:"spec"`
	// +optional
	Status NodeGroupStatus `json:"status,omitempty"`

	// pinnedHash, when set, is LaunchHash's answer (PinLaunchHash), and
	// pinnedSorted and pinnedOrdered the hashes with its taints as a set
	// and in the order written (MatchesLaunchHash). They live only in
	// memory: neither stored nor served.
	pinnedHash    string `json:"-"`
	pinnedSorted  string `json:"-"`
	pinnedOrdered string `json:"-"`
}

// NodeGroupSpec is the desired shape of a NodeGroup.
//
// +kubebuilder:validation:XValidation:rule="self.minSize <= self.maxSize",message="minSize must be less than or equal to maxSize",fieldPath=".minSize"
// +kubebuilder:validation:XValidation:rule="!has(self.provider.clusterAPI) || (size(self.instanceTypes) == 1 && size(self.instanceTypes[0].offerings) == 1)",message="a clusterAPI node group has exactly one instance type with one offering: the machines of one MachineDeployment, MachineSet or MachinePool are all alike",fieldPath=".instanceTypes"
type NodeGroupSpec struct {
	// MinSize is the number of nodes berth keeps in the group even when they
	// are empty.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	// +optional
	MinSize int32 `json:"minSize"`

	// MaxSize is the largest number of nodes the group may have.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +required
	MaxSize int32 `json:"maxSize"`

	// Template is what every node of the group gets, and what berth assumes
	// of a node that does not exist yet when it scales up from zero.
	// +optional
	Template NodeTemplate `json:"template,omitempty"`

	// InstanceTypes are the machine types the group may launch, each with
	// the offerings (zone, capacity type, price) it can be bought at.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=500
	// +listType=map
	// +listMapKey=name
	// +required
	InstanceTypes []InstanceType `json:"instanceTypes"`

	// Weight orders node groups: a pod is placed on the groups of the
	// highest weight that can fit it, and price decides among groups of equal
	// weight.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// Limits caps the total capacity of the group's nodes (for example
	// cpu: 100, or pods: 500, the nodes' pod slots; a type that does not
	// say has what the group's nodes of the type allow, else 110). A node
	// to launch counts as its type's capacity, and of what the type does
	// not say, as the group's nodes of the type have it. berth does not
	// launch a node that would exceed it.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// Provider says how nodes of this group are created.
	// +required
	Provider Provider `json:"provider"`

	// Disruption says when berth removes nodes of the group that are no
	// longer needed. Scale-down is on by default: omitted, berth removes
	// empty and under-utilised nodes 30 s after they became removable, at
	// most 10 % of the group (at least one node) at a time.
	// +optional
	Disruption Disruption `json:"disruption,omitempty"`

	// DeletionPolicy says what happens to the group's nodes when the
	// NodeGroup is deleted. Drain (the default): berth drains and removes
	// them through scale-down's path (drain rules, PodDisruptionBudgets,
	// the group's budget; minSize, consolidation policy, consolidateAfter
	// and the window no longer apply, and their pods need not fit
	// elsewhere: they wait for a node of another group), and the NodeGroup
	// goes once its last node is gone. Orphan: berth leaves the nodes
	// running, takes its marks off them (they are no longer berth's to
	// remove), and the NodeGroup goes at once.
	// +kubebuilder:validation:Enum=Drain;Orphan
	// +kubebuilder:default=Drain
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DeletionPolicy is what deleting a NodeGroup does to its nodes.
type DeletionPolicy string

// Deletion policies.
const (
	// DeletionDrain drains and removes the group's nodes.
	DeletionDrain DeletionPolicy = "Drain"
	// DeletionOrphan leaves the group's nodes running, no longer berth's.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// FinalizerNodes on a NodeGroup holds its deletion until its nodes are
// drained and removed (or orphaned), as its deletionPolicy says.
const FinalizerNodes = "berth.dev/nodes"

// NodeTemplate is the part of a node that berth sets at launch.
// +kubebuilder:validation:XValidation:rule="((has(self.taints) ? self.taints.map(t, t.key + ':' + t.effect) : []) + (has(self.startupTaints) ? self.startupTaints.map(t, t.key + ':' + t.effect) : [])).all(k, ((has(self.taints) ? self.taints.map(t, t.key + ':' + t.effect) : []) + (has(self.startupTaints) ? self.startupTaints.map(t, t.key + ':' + t.effect) : [])).exists_one(j, j == k))",message="taints and startupTaints must not repeat a key and effect: a node's taints are unique by key and effect, and the API server would refuse every node of the group"
type NodeTemplate struct {
	// Labels are added to every node of the group. Keys and values must be
	// valid label keys and values, and must not be one of the labels berth
	// sets itself (berth.dev/nodegroup, berth.dev/capacity-type,
	// berth.dev/initialized, kubernetes.io/hostname,
	// node.kubernetes.io/instance-type, topology.kubernetes.io/zone,
	// kubernetes.io/arch, which is the instance type's architecture, and
	// the deprecated beta names of the well-known labels, which follow
	// theirs). kubernetes.io/os says which operating system the group's
	// nodes run (linux when it is not set), as their kubelets will label
	// them.
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="label keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['berth.dev/nodegroup', 'berth.dev/capacity-type', 'berth.dev/initialized', 'kubernetes.io/hostname', 'node.kubernetes.io/instance-type', 'topology.kubernetes.io/zone']))",message="labels must not set a label berth sets on every node itself (node group, capacity type, initialized, hostname, instance type, zone)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['kubernetes.io/arch', 'beta.kubernetes.io/arch', 'beta.kubernetes.io/os', 'beta.kubernetes.io/instance-type', 'failure-domain.beta.kubernetes.io/zone']))",message="labels must not set kubernetes.io/arch (set instanceTypes[].architecture) nor a deprecated beta label (berth sets each from its well-known label)"
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// Taints are added to every node of the group.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Taints []NodeTaint `json:"taints,omitempty"`

	// StartupTaints are present when a node boots and removed by an agent
	// once it is ready; berth ignores them when deciding whether a pod fits.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	StartupTaints []NodeTaint `json:"startupTaints,omitempty"`
}

// LabelValue is a label value: at most 63 characters of alphanumerics,
// '-', '_' or '.', starting and ending with an alphanumeric, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// NodeTaint is a taint of a node template. It mirrors corev1.Taint but
// validates the effect.
type NodeTaint struct {
	// Key of the taint: a qualified name, like a label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="a taint key must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
	// +required
	Key string `json:"key"`
	// Value of the taint: like a label value.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Value string `json:"value,omitempty"`
	// Effect of the taint: NoSchedule, PreferNoSchedule or NoExecute.
	// +required
	Effect TaintEffect `json:"effect"`
}

// TaintEffect is the effect of a taint.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

// InstanceType is a machine type that a node group can launch.
type InstanceType struct {
	// Name of the instance type, e.g. m5.large. Nodes carry it in the
	// node.kubernetes.io/instance-type label, so it must be a label value.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +required
	Name string `json:"name"`

	// Capacity of a node of this type: cpu, memory, pods,
	// ephemeral-storage and any extended resources such as nvidia.com/gpu.
	// A new node is planned with it as its allocatable until the group has
	// a node of the type up; then with what such nodes make allocatable
	// where that is less, or where the type does not say.
	// +kubebuilder:validation:XValidation:rule="'cpu' in self && 'memory' in self",message="capacity must include cpu and memory"
	// +required
	Capacity corev1.ResourceList `json:"capacity"`

	// Architecture of the machine, amd64 or arm64.
	// +kubebuilder:validation:Enum=amd64;arm64
	// +kubebuilder:default=amd64
	// +optional
	Architecture string `json:"architecture,omitempty"`

	// Offerings are the zones and capacity types the type can be bought at,
	// each with its price.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=zone
	// +listMapKey=capacityType
	// +required
	Offerings []Offering `json:"offerings"`

	// Devices are what the DRA drivers on a node of this type publish, one
	// entry per driver, as its resource.k8s.io/v1 ResourceSlices carry them
	// (the pool is the node's name). The planner allocates pods'
	// ResourceClaims on them when it scales a group from zero, and the
	// kwok provider publishes them as ResourceSlices for the nodes it
	// launches.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=driver
	// +optional
	Devices []DeviceDriver `json:"devices,omitempty"`
}

// DeviceDriver is what one DRA driver publishes on a node.
type DeviceDriver struct {
	// Driver is the DRA driver's name, a DNS subdomain such as
	// gpu.example.com.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Driver string `json:"driver"`

	// Devices the driver publishes, at most 128 (one ResourceSlice's
	// limit), each with a name unique within the driver.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +listType=map
	// +listMapKey=name
	// +required
	Devices []resourcev1.Device `json:"devices"`

	// SharedCounters are counter sets that partitionable devices consume
	// (devices[].consumesCounters), published in a slice of their own.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	SharedCounters []resourcev1.CounterSet `json:"sharedCounters,omitempty"`
}

// Offering is one way to buy an instance type.
type Offering struct {
	// Zone the node is launched in (topology.kubernetes.io/zone, so it
	// must be a label value).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +required
	Zone string `json:"zone"`
	// CapacityType is spot or on-demand.
	// +required
	CapacityType CapacityType `json:"capacityType"`
	// PricePerHour of one node as a decimal number (e.g. "0.096"), in any
	// currency as long as all node groups use the same one.
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?$')",message="pricePerHour must be a non-negative decimal number such as \"0.096\""
	// +required
	PricePerHour string `json:"pricePerHour"`
	// StoppedPricePerHour of one suspended standby node (its disk and
	// address), in the currency of PricePerHour. Default: a tenth of
	// PricePerHour.
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?$')",message="stoppedPricePerHour must be a non-negative decimal number such as \"0.01\""
	// +optional
	StoppedPricePerHour string `json:"stoppedPricePerHour,omitempty"`
}

// Provider says how nodes of a group are created. Exactly one member is
// set, and it cannot change: the group's nodes were made by it, and
// another provider would remove them as its own (the kwok provider
// deleting the Node objects of running Cluster API machines).
// +kubebuilder:validation:XValidation:rule="(has(self.kwok) ? 1 : 0) + (has(self.clusterAPI) ? 1 : 0) == 1",message="exactly one provider must be set (supported: kwok, clusterAPI)"
// +kubebuilder:validation:XValidation:rule="has(self.clusterAPI) == has(oldSelf.clusterAPI)",message="a node group's provider cannot be changed (kwok to clusterAPI or back): create another node group"
type Provider struct {
	// KWOK creates nodes as API objects that KWOK's fake kubelet keeps
	// Ready; for development, tests and demos.
	// +optional
	KWOK *KWOKProvider `json:"kwok,omitempty"`

	// ClusterAPI scales a Cluster API MachineDeployment, MachineSet or
	// MachinePool in the management cluster berth is given
	// (--clusterapi-kubeconfig): berth changes its replicas through the
	// scale subresource and removes a chosen node by marking its Machine
	// with cluster.x-k8s.io/delete-machine before lowering replicas.
	// +optional
	ClusterAPI *ClusterAPIProvider `json:"clusterAPI,omitempty"`
}

// ClusterAPIKind is the kind of Cluster API object a node group scales.
// +kubebuilder:validation:Enum=MachineDeployment;MachineSet;MachinePool
type ClusterAPIKind string

// Kinds of Cluster API objects a node group can scale.
const (
	ClusterAPIMachineDeployment ClusterAPIKind = "MachineDeployment"
	ClusterAPIMachineSet        ClusterAPIKind = "MachineSet"
	ClusterAPIMachinePool       ClusterAPIKind = "MachinePool"
)

// ClusterAPIProvider names the Cluster API object whose machines are the
// group's nodes. Its annotations are read as Cluster Autoscaler reads them:
// cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size and -max-size
// narrow the group's minSize and maxSize, and the
// capacity.cluster-autoscaler.kubernetes.io/* annotations (cpu, memory,
// ephemeral-disk, maxPods, gpu-type, gpu-count, labels, taints) override the
// capacity, labels and taints berth assumes for a node that does not exist
// yet.
// +kubebuilder:validation:XValidation:rule="(has(self.kind) && self.kind != 'MachineDeployment') || size(self.name) <= 63",message="a MachineDeployment's name is at most 63 characters: Cluster API labels its Machines with it (cluster.x-k8s.io/deployment-name), and label values are at most 63 characters"
type ClusterAPIProvider struct {
	// Kind of the object: MachineDeployment, MachineSet or MachinePool.
	// +kubebuilder:default=MachineDeployment
	// +kubebuilder:validation:MaxLength=17
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the Cluster API object of a node group cannot be changed: create another node group"
	Kind ClusterAPIKind `json:"kind,omitempty"`
	// APIVersion of Cluster API's objects (Machines are read with the same
	// version).
	// +kubebuilder:validation:Enum=cluster.x-k8s.io/v1beta2;cluster.x-k8s.io/v1beta1
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:default="cluster.x-k8s.io/v1beta2"
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the Cluster API object of a node group cannot be changed: create another node group"
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the object in the management cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the Cluster API object of a node group cannot be changed: create another node group"
	Namespace string `json:"namespace"`
	// Name of the object. Cluster API labels the object's Machines with
	// it, and berth finds them by that label: a MachineDeployment's name
	// is at most 63 characters (a label value); a longer MachineSet's or
	// MachinePool's name is labelled with its hash, as Cluster API does.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the Cluster API object of a node group cannot be changed: create another node group"
	Name string `json:"name"`
	// MachineTimeout is how long a Machine may go without infrastructure
	// (a provider ID) before berth counts the launch as failed: the next
	// launch of the group returns insufficient capacity, berth removes
	// the stuck Machine and falls back to other groups. Default 10m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="machineTimeout must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	MachineTimeout *metav1.Duration `json:"machineTimeout,omitempty"`
}

// KWOKProvider configures the KWOK cloud provider.
type KWOKProvider struct {
	// LaunchDelay is how long a new node stays NotReady before KWOK turns
	// it Ready, as a real machine needs time to boot. Default 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="launchDelay must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	LaunchDelay *metav1.Duration `json:"launchDelay,omitempty"`

	// ResumeDelay is how long a suspended standby node stays NotReady after
	// berth resumes it, before KWOK turns it Ready again. Default: a third
	// of LaunchDelay (a suspended machine keeps its disk and boots faster).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="resumeDelay must be a duration such as 30s, 10m or 720h (units h, m, s, ms; not negative)"
	ResumeDelay *metav1.Duration `json:"resumeDelay,omitempty"`

	// FailOfferings injects failures: a launch of a matching offering fails
	// with InsufficientCapacity, as a cloud out of spot capacity would.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	FailOfferings []OfferingSelector `json:"failOfferings,omitempty"`
}

// OfferingSelector matches offerings; an empty field matches any value.
type OfferingSelector struct {
	// InstanceType to match.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// Zone to match.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Zone string `json:"zone,omitempty"`
	// CapacityType to match.
	// +optional
	CapacityType CapacityType `json:"capacityType,omitempty"`
}

// NodeGroupStatus is the observed state of a NodeGroup.
type NodeGroupStatus struct {
	// ObservedGeneration is the generation of the spec this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Nodes is the number of nodes of the group, launching ones included.
	// +optional
	Nodes int32 `json:"nodes"`
	// ReadyNodes is the number of nodes of the group that are Ready.
	// +optional
	ReadyNodes int32 `json:"readyNodes"`
	// Resources is the total capacity of the group's nodes.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// PricePerHour is the total price of the group's nodes.
	// +optional
	PricePerHour string `json:"pricePerHour,omitempty"`
	// UnavailableOfferings are the offerings berth avoids after failed
	// launches, until when, and how many failures in a row doubled the
	// wait. A restarted or new leader reads them back, so it does not
	// retry a broken offering at once.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	UnavailableOfferings []UnavailableOffering `json:"unavailableOfferings,omitempty"`
	// NodesByState counts the group's nodes by where they are in their
	// life.
	// +optional
	NodesByState NodesByState `json:"nodesByState,omitempty"`
	// LastScaleUp is the last node berth launched for the group, and why.
	// +optional
	LastScaleUp *ScaleEvent `json:"lastScaleUp,omitempty"`
	// LastScaleDown is the last node berth removed from the group, and why.
	// +optional
	LastScaleDown *ScaleEvent `json:"lastScaleDown,omitempty"`
	// Conditions: LaunchFailing, ScaleDownSuspended.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodesByState counts nodes by state. A node is in one of launching,
// ready, notReady (Ready once, not now), standby (suspended standby
// nodes); draining, drifted, expired, interrupted and unhealthy count
// nodes among the others, as berth sees them.
type NodesByState struct {
	// +optional
	Standby int32 `json:"standby,omitempty"`
	// +optional
	Launching int32 `json:"launching"`
	// +optional
	Ready int32 `json:"ready"`
	// +optional
	NotReady int32 `json:"notReady"`
	// +optional
	Draining int32 `json:"draining"`
	// +optional
	Drifted int32 `json:"drifted"`
	// +optional
	Expired int32 `json:"expired"`
	// +optional
	Interrupted int32 `json:"interrupted"`
	// +optional
	Unhealthy int32 `json:"unhealthy"`
}

// ScaleEvent is a node berth launched or removed.
type ScaleEvent struct {
	// Time of the launch or removal.
	// +required
	Time metav1.Time `json:"time"`
	// Node launched or removed.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Node string `json:"node"`
	// Reason: for a launch PendingPods, MinSize, Headroom or Replacement;
	// for a removal a DisruptionReason or NodeGroupDeleted.
	// +kubebuilder:validation:MaxLength=64
	// +required
	Reason string `json:"reason"`
	// Message says more, for a user.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// NodeGroupList is a list of NodeGroups.
//
// +kubebuilder:object:root=true
type NodeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroup `json:"items"`
}

// UnavailableOffering is an offering berth avoids after a failed launch.
type UnavailableOffering struct {
	// InstanceType of the offering.
	// +kubebuilder:validation:MaxLength=63
	// +required
	InstanceType string `json:"instanceType"`
	// Zone of the offering.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Zone string `json:"zone"`
	// CapacityType of the offering.
	// +required
	CapacityType CapacityType `json:"capacityType"`
	// Until is when berth tries the offering again.
	// +required
	Until metav1.Time `json:"until"`
	// Streak counts the failures in a row.
	// +kubebuilder:validation:Minimum=1
	// +required
	Streak int32 `json:"streak"`
	// Message of the last failure.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// Reason of the last failure: InsufficientCapacity (the provider had
	// no capacity), LaunchError (the provider refused the launch or its
	// API call failed), LaunchTimedOut (the machine did not register a
	// Ready node within the max provision time) or CapacityReclaimed (a
	// node of the offering got an interruption notice).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
}
