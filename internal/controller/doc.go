// Package controller holds berth's controllers, one package each. They
// never import each other; what they share lives in internal/state and is
// passed in through narrow interfaces.
//
// RBAC the controller manager needs beyond its controllers: leader
// election leases and events.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
package controller
