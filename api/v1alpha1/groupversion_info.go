// Package v1alpha1 holds the berth.dev/v1alpha1 API: NodeGroup, Headroom,
// CompanionProfile, TenantType and Tenant.
//
// +kubebuilder:object:generate=true
// +groupName=berth.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every berth API object.
var GroupVersion = schema.GroupVersion{Group: "berth.dev", Version: "v1alpha1"}

// AddToScheme registers the berth types with a scheme. The list is explicit
// (no init-time registration) so that adding a type is one visible line.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&NodeGroup{}, &NodeGroupList{},
		&Headroom{}, &HeadroomList{},
		&CompanionProfile{}, &CompanionProfileList{},
		&TenantType{}, &TenantTypeList{},
		&Tenant{}, &TenantList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
