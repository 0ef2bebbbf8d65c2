// Package rbac embeds the controller's RBAC: the ClusterRole generated from
// the kubebuilder:rbac markers of internal/controller (make generate), its
// ServiceAccount and binding. The end-to-end tests run the controller with
// exactly these permissions.
package rbac

import "embed"

// Files holds the manifests.
//
//go:embed *.yaml
var Files embed.FS
