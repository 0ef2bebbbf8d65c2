package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CompanionShareBy says which workloads on one node share one companion.
// +kubebuilder:validation:Enum=None;Volume;VolumeAndMountOptions
type CompanionShareBy string

const (
	// ShareByNone gives every workload a companion of its own.
	ShareByNone CompanionShareBy = "None"
	// ShareByVolume lets workloads mounting the same PersistentVolume of the
	// profile's CSI driver share one companion per node.
	ShareByVolume CompanionShareBy = "Volume"
	// ShareByVolumeAndMountOptions is ShareByVolume, and the volume's mount
	// options must be equal too.
	ShareByVolumeAndMountOptions CompanionShareBy = "VolumeAndMountOptions"
)

// CompanionProfile describes pods that get a companion: a pod created on
// their node only after they are bound (a CSI driver's mount pod, a
// node-local agent per workload). berth's admission webhook gates the
// workloads it selects; berth plans each with room for its companion
// (shared where the share key says so), holds that room with a
// placeholder on the chosen node, removes the gate, and hands the room to
// the companion when it appears.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cp,categories=berth
// +kubebuilder:printcolumn:name="Driver",type=string,JSONPath=`.spec.workloads.csiDriver`
// +kubebuilder:printcolumn:name="Share",type=string,JSONPath=`.spec.shareBy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CompanionProfile struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CompanionProfileSpec `json:"spec"`
}

// CompanionProfileSpec is the desired behaviour of a CompanionProfile.
// +kubebuilder:validation:XValidation:rule="has(self.companion.resources) || has(self.companion.fromVolumeAttributes)",message="companion needs resources, fromVolumeAttributes or both"
// +kubebuilder:validation:XValidation:rule="!has(self.shareBy) || self.shareBy == 'None' || has(self.workloads.csiDriver)",message="shareBy Volume and VolumeAndMountOptions need workloads.csiDriver"
type CompanionProfileSpec struct {
	// Workloads selects the pods that get a companion. All given
	// conditions must hold.
	// +required
	Workloads CompanionWorkloads `json:"workloads"`
	// Companion is the size of the companion.
	// +required
	Companion CompanionShape `json:"companion"`
	// Recognize tells how companion pods are recognised when they appear.
	// +required
	Recognize CompanionRecognition `json:"recognize"`
	// ShareBy says which workloads on one node share one companion: by
	// default Volume when workloads.csiDriver is set, None otherwise.
	// +optional
	ShareBy CompanionShareBy `json:"shareBy,omitempty"`
	// UngateAfter bounds how long berth holds a workload's gate: after it
	// the gate is removed whatever happened (event
	// CompanionHeadroomSkipped). Between 1s and 10m.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="ungateAfter must be between 1s and 10m"
	// +optional
	UngateAfter *metav1.Duration `json:"ungateAfter,omitempty"`
}

// CompanionWorkloads selects workload pods.
// +kubebuilder:validation:XValidation:rule="has(self.namespaceSelector) || has(self.podSelector) || has(self.csiDriver)",message="select workloads by namespaceSelector, podSelector or csiDriver"
type CompanionWorkloads struct {
	// NamespaceSelector selects the workloads' namespaces.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions with In or NotIn need values, with Exists or DoesNotExist none"
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector selects the workload pods by label.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions with In or NotIn need values, with Exists or DoesNotExist none"
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// CSIDriver selects pods that mount a PersistentVolumeClaim of this
	// CSI driver (its bound volume's spec.csi.driver, or its storage
	// class's provisioner while it is not bound).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	CSIDriver string `json:"csiDriver,omitempty"`
}

// CompanionShape is the size of a companion.
type CompanionShape struct {
	// Resources are the companion's requests (cpu and memory), or the
	// default for what FromVolumeAttributes does not give.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// FromVolumeAttributes reads the requests from volume attributes of
	// the workload's PersistentVolume (spec.csi.volumeAttributes), as the
	// Mountpoint S3 driver does with
	// mountpointContainerResourcesRequestsCpu and ...Memory.
	// +optional
	FromVolumeAttributes *CompanionAttributes `json:"fromVolumeAttributes,omitempty"`
}

// CompanionAttributes name the volume attributes that hold a companion's
// requests.
type CompanionAttributes struct {
	// CPU is the attribute holding the cpu request.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	CPU string `json:"cpu,omitempty"`
	// Memory is the attribute holding the memory request.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Memory string `json:"memory,omitempty"`
}

// CompanionRecognition tells how companion pods are recognised.
type CompanionRecognition struct {
	// Namespace of the companions (a CSI driver's own namespace):
	// required, so that pods of other namespaces, whoever creates them,
	// never take the room berth holds for companions.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
	// Selector selects companion pods by label.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions with In or NotIn need values, with Exists or DoesNotExist none"
	// +required
	Selector metav1.LabelSelector `json:"selector"`
}

// +kubebuilder:object:root=true

// CompanionProfileList is a list of CompanionProfiles.
type CompanionProfileList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompanionProfile `json:"items"`
}
