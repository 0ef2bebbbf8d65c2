package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tenant conditions and their reasons.
const (
	// ConditionScheduled is True once the tenant's pod is bound to a node;
	// while it is False, its message says what berth does about it.
	ConditionScheduled = "Scheduled"

	// ReasonTypeNotFound: the tenant's TenantType does not exist.
	ReasonTypeNotFound = "TypeNotFound"
	// ReasonNodeGroupNotFound: the type's NodeGroup does not exist.
	ReasonNodeGroupNotFound = "NodeGroupNotFound"
	// ReasonNamespaceTaken: the namespace tenant-<name> exists and does
	// not belong to the tenant (someone else's, or a former tenant's still
	// terminating); berth leaves it alone.
	ReasonNamespaceTaken = "NamespaceTaken"
	// ReasonApplyFailed: the API server refused one of the tenant's
	// objects (the message says which and why); retried with backoff.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonWaitingForPod: the tenant's pod does not exist yet.
	ReasonWaitingForPod = "WaitingForPod"
	// ReasonLaunchingNode: berth is launching a node for the pod.
	ReasonLaunchingNode = "LaunchingNode"
	// ReasonNoNodeCanBeLaunched: berth found no node group that can take
	// the pod (the message says why, e.g. the group is at its maxSize).
	ReasonNoNodeCanBeLaunched = "NoNodeCanBeLaunched"
	// ReasonWaitingForScheduler: the pod is pending and berth has said
	// nothing about it yet.
	ReasonWaitingForScheduler = "WaitingForScheduler"
	// ReasonPodScheduled: the pod is bound to a node.
	ReasonPodScheduled = "PodScheduled"
	// ReasonPodReady: the pod runs and is Ready.
	ReasonPodReady = "PodReady"
	// ReasonPodNotReady: the pod is bound but not Ready yet.
	ReasonPodNotReady = "PodNotReady"
	// ReasonTerminating: the tenant is being deleted.
	ReasonTerminating = "Terminating"
)

// Labels berth puts on a tenant's objects.
const (
	// LabelTenant names the Tenant a namespace, ConfigMap, Deployment,
	// Service or pod belongs to. Every tenant pod carries it: the required
	// anti-affinity of dedicated tenants selects it.
	LabelTenant = "berth.dev/tenant"
	// LabelTenantType names the TenantType of a tenant's pod.
	LabelTenantType = "berth.dev/tenant-type"
	// TenantNamespacePrefix prefixes the namespace of every tenant:
	// tenant-<name>.
	TenantNamespacePrefix = "tenant-"
)

// TenantPhase is where a tenant is in its life.
// +kubebuilder:validation:Enum=Pending;Provisioning;Running;Failed;Terminating
type TenantPhase string

// Tenant phases.
const (
	// TenantPending: the pod waits and no node is being launched for it.
	TenantPending TenantPhase = "Pending"
	// TenantProvisioning: a node is being launched for the pod, or the pod
	// is bound and starting.
	TenantProvisioning TenantPhase = "Provisioning"
	// TenantRunning: the pod runs and is Ready.
	TenantRunning TenantPhase = "Running"
	// TenantFailed: berth cannot run the tenant as specified (unknown type,
	// missing node group); the Ready condition says why.
	TenantFailed TenantPhase = "Failed"
	// TenantTerminating: the tenant is being deleted.
	TenantTerminating TenantPhase = "Terminating"
)

// Tenant is one tenant: berth runs it in the namespace tenant-<name> (a
// ConfigMap of its configuration, a Deployment of one pod on a node of its
// type's group, the type's Service), all owned by the Tenant so that
// deleting it deletes them. Its name is a DNS label of at most 56
// characters that starts with a letter, so that its namespace's name is a
// DNS label too and its Service's name is valid (DNS-1035).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=berth
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Node Group",type=string,JSONPath=`.status.nodeGroup`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 56 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="a tenant's name must be a DNS label of at most 56 characters that starts with a letter (lower-case alphanumerics and '-', ending with an alphanumeric), so that its namespace tenant-<name> and its Service <name> are valid names"
type Tenant struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantSpec `json:"spec"`
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantSpec is the desired state of a Tenant.
type TenantSpec struct {
	// Type is the name of the tenant's TenantType. It cannot change: a
	// tenant of another type is a new tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable: delete the tenant and create it again"
	// +required
	Type string `json:"type"`
	// Config overrides the type's configuration values.
	// +optional
	Config ConfigValues `json:"config,omitempty"`
	// SecretRefs name Secrets in the tenant's namespace whose keys become
	// environment variables of its container. Each must exist: until it
	// does the container waits (CreateContainerConfigError), and the
	// tenant's Ready condition says so.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	SecretRefs []TenantSecretRef `json:"secretRefs,omitempty"`
}

// TenantSecretRef names a Secret in the tenant's namespace.
type TenantSecretRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// TenantStatus is what berth observed of a Tenant.
type TenantStatus struct {
	// Phase summarises the conditions.
	// +optional
	Phase TenantPhase `json:"phase,omitempty"`
	// Namespace holds the tenant's objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// NodeName is the node the tenant's pod is bound to.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// NodeGroup is the NodeGroup of that node.
	// +optional
	NodeGroup string `json:"nodeGroup,omitempty"`
	// ObservedGeneration is the generation the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Scheduled (with berth's reason while the pod waits) and
	// Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TenantNamespace is the namespace of the tenant's objects.
func (t *Tenant) TenantNamespace() string { return TenantNamespacePrefix + t.Name }

// +kubebuilder:object:root=true

// TenantList is a list of Tenants.
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}
