package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantType is a kind of tenant: the NodeGroup its tenants run on, whether
// each gets a node of its own, and what runs for it (a pod template, an
// optional Service, default configuration). Tolerations and the node
// selector of its pods are derived from the NodeGroup's template, so that
// they never disagree with the group.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tt,categories=berth
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="name must be at most 63 characters: berth labels the tenants' objects with it (berth.dev/tenant-type), and label values are at most 63 characters"
// +kubebuilder:printcolumn:name="Node Group",type=string,JSONPath=`.spec.nodeGroup`
// +kubebuilder:printcolumn:name="Dedicated",type=boolean,JSONPath=`.spec.dedicatedNode`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TenantType struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantTypeSpec `json:"spec"`
}

// TenantTypeSpec is the desired shape of the tenants of a type.
type TenantTypeSpec struct {
	// NodeGroup is the name of the NodeGroup the type's tenants run on.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	NodeGroup string `json:"nodeGroup"`
	// DedicatedNode gives every tenant a node of its own: no other tenant
	// pod (of any type) runs next to it. Enforced by a required pod
	// anti-affinity, which kube-scheduler and berth's planner both honour.
	// +kubebuilder:default=true
	// +optional
	DedicatedNode *bool `json:"dedicatedNode,omitempty"`
	// Template is the tenant's container.
	// +required
	Template TenantTemplate `json:"template"`
	// Service, when set, exposes every tenant of the type.
	// +optional
	Service *TenantService `json:"service,omitempty"`
	// Config holds the default configuration of the type's tenants: a
	// tenant's own values override these. The merged values become the
	// tenant's ConfigMap, given to its container as environment.
	// +optional
	Config ConfigValues `json:"config,omitempty"`
}

// Dedicated reports whether each tenant of the type gets a node of its
// own (the default).
func (s *TenantTypeSpec) Dedicated() bool { return s.DedicatedNode == nil || *s.DedicatedNode }

// ConfigValues are configuration keys and values: keys as a ConfigMap's,
// at most 64 of them, values of at most 4096 characters.
// +kubebuilder:validation:MaxProperties=64
// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 253 && k.matches('^[-._a-zA-Z0-9]+$') && k != '.' && !k.startsWith('..'))",message="config keys must be ConfigMap keys: at most 253 characters of alphanumerics, '-', '_' or '.', not '.' and not starting with '..'"
type ConfigValues map[string]ConfigValue

// ConfigValue is one configuration value.
// +kubebuilder:validation:MaxLength=4096
type ConfigValue string

// TenantTemplate is the container run for each tenant.
type TenantTemplate struct {
	// Image of the container.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Image string `json:"image"`
	// Command overrides the image's entrypoint.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`
	// Args are the entrypoint's arguments.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`
	// Resources of the container. Size requests so that one tenant fits a
	// node of the type's group.
	// +optional
	Resources TenantResources `json:"resources,omitempty"`
	// Ports the container listens on.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=containerPort
	// +optional
	Ports []TenantPort `json:"ports,omitempty"`
	// Env are fixed environment variables; they win over configuration
	// keys of the same name (which come from the tenant's ConfigMap).
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []TenantEnvVar `json:"env,omitempty"`
}

// TenantResources are a container's requests and limits.
type TenantResources struct {
	// Requests of the container (what berth plans nodes for).
	// +kubebuilder:validation:XValidation:rule="self.size() <= 16",message="at most 16 resources"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits of the container.
	// +kubebuilder:validation:XValidation:rule="self.size() <= 16",message="at most 16 resources"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// TenantPort is a port the tenant's container listens on.
type TenantPort struct {
	// Name of the port (an IANA service name).
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`
	// ContainerPort is the port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	ContainerPort int32 `json:"containerPort"`
	// Protocol of the port.
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// TenantEnvVar is a fixed environment variable.
type TenantEnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Value of the variable.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Value string `json:"value,omitempty"`
}

// TenantService exposes each tenant's pod.
type TenantService struct {
	// Type of the Service.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// Ports of the Service.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=port
	// +required
	Ports []TenantServicePort `json:"ports"`
}

// TenantServicePort is one port of a tenant's Service.
type TenantServicePort struct {
	// Name of the port.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`
	// Port the Service serves.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`
	// TargetPort is the container port; default Port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	TargetPort int32 `json:"targetPort,omitempty"`
	// Protocol of the port.
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// +kubebuilder:object:root=true

// TenantTypeList is a list of TenantTypes.
type TenantTypeList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantType `json:"items"`
}
