// Package controller holds berth's controllers, one package each. They
// never import each other; what they share lives in internal/state and is
// passed in through narrow interfaces.
//
// RBAC the controller manager needs beyond its controllers: its own
// leader election lease (by name, in berth-system), events, and token and
// access reviews to authenticate and authorize callers of /metrics.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=berth-system,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=berth-system,resources=leases,resourceNames=berth-controller,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
package controller
