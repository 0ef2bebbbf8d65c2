// Package v1beta1 is berth's copy of the upstream CapacityBuffer API
// (autoscaling.x-k8s.io/v1beta1, from Kubernetes autoscaling's buffers
// proposal, served by Cluster Autoscaler and planned for Karpenter). berth
// honours CapacityBuffers like its own Headrooms, so that users of those
// buffers can switch without rewriting them; the CRD is in berth's
// manifests for clusters that lack it. The schema follows upstream.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the API.
var GroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1beta1"}

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Provisioning strategies and condition types.
const (
	// StrategyActiveCapacity makes the autoscaler keep the buffer as spare
	// capacity on running nodes (the default).
	StrategyActiveCapacity = "buffer.x-k8s.io/active-capacity"
	// StrategyStandbyCapacity makes berth keep the buffer's chunks on
	// suspended standby nodes, resumed when pods need them (berth's
	// standby tier; the name follows the active strategy's).
	StrategyStandbyCapacity = "buffer.x-k8s.io/standby-capacity"
	// ConditionReadyForProvisioning is True when the buffer was translated
	// into a pod template and a number of replicas.
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	// ConditionProvisioning is True while an autoscaler provisions it.
	ConditionProvisioning = "Provisioning"
	// ConditionLimitedByQuotas is True when the namespace's ResourceQuotas
	// cut the buffer's chunks, False when they do not (Cluster
	// Autoscaler's condition).
	ConditionLimitedByQuotas = "LimitedByQuotas"
	// ReasonResourceQuotasAllocated is the reason of LimitedByQuotas.
	ReasonResourceQuotasAllocated = "ResourceQuotasAllocated"
)

// CapacityBuffer is spare capacity expressed as a number of chunks of one
// pod shape.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy"
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec CapacityBufferSpec `json:"spec"`
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// LocalObjectRef names an object in the same namespace.
type LocalObjectRef struct {
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ScalableRef names an object with a scale subresource.
type ScalableRef struct {
	// APIGroup of the object; empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the object, e.g. Deployment.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the object.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ResourceName names a resource.
type ResourceName string

// ResourceList is a set of resource quantities, none negative.
// +kubebuilder:validation:MaxProperties=16
// +kubebuilder:validation:XValidation:rule="self.all(k, !string(self[k]).startsWith('-'))",message="quantities must not be negative"
type ResourceList map[ResourceName]resource.Quantity

// CapacityBufferSpec is the buffer wanted.
//
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="with podTemplateRef, replicas or limits must be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="set either podTemplateRef or scalableRef, not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy; default buffer.x-k8s.io/active-capacity.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names a PodTemplate in the namespace with the shape of
	// one chunk.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names a workload whose pod template is the chunk shape and
	// whose replicas percentage refers to.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is the number of chunks. With percentage, the larger wins.
	// berth bounds it (the upstream API does not): a namespace that may
	// create buffers must not be able to ask for unbounded capacity.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the scalable object's replicas, rounded up to the
	// nearest integer (of zero replicas, zero).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits cap the chunks by their total requests; with neither replicas
	// nor percentage, as many chunks as fit the limits. Quantities must
	// not be negative.
	// +optional
	Limits *ResourceList `json:"limits,omitempty"`
}

// CapacityBufferStatus is the buffer as translated by its controller.
type CapacityBufferStatus struct {
	// PodTemplateRef is the PodTemplate the chunks use.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is the number of chunks.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of the PodTemplate used.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning, Provisioning, LimitedByQuotas.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy in effect.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
