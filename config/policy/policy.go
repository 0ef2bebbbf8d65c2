// Package policy embeds the ValidatingAdmissionPolicies installed with
// berth: they make the owner mark on nodes (berth.dev/launched-by)
// trustworthy. Only berth's service account may set or change it, and
// berth's service account may delete only nodes that carry it, so a bug or
// a stolen token of berth's cannot delete nodes berth did not launch. A
// third keeps berth's writes of namespaces, ConfigMaps, Services and
// Deployments (for tenants) in tenant namespaces. The end-to-end tests
// install them with the RBAC of config/rbac.
package policy

import "embed"

// Files holds the manifests.
//
//go:embed *.yaml
var Files embed.FS
