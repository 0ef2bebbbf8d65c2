// Package policy embeds the ValidatingAdmissionPolicies installed with
// berth. They narrow the rights of berth's service account to what berth
// does, so that a bug or a stolen token of berth's cannot do more:
//   - the owner mark on nodes (berth.dev/launched-by) is trustworthy: only
//     berth's account may set or change it, through a node or its status;
//     berth's account creates only the KWOK nodes it launches (KWOK's and
//     berth's marks, a kwok:// provider ID, no control-plane label),
//     changes and deletes only nodes that carry it, adopts
//     a Cluster API node only by adding labels and its own annotations
//     (the mark among them), and never changes or deletes a control-plane
//     node;
//   - of a pod, berth's account changes only its own berth.dev/ labels and
//     annotations, removes only its own scheduling gates and nominates a
//     node; nothing else (no image, no spec, no other metadata);
//   - berth's account writes only its own webhook configuration
//     (berth-companion, pod creation only, served in berth-system or at a
//     loopback URL);
//   - berth's writes of namespaces, ConfigMaps, Services and Deployments
//     stay in tenant namespaces (and Deployments in berth-system);
//   - in berth-system, berth's account runs only pods labelled as its
//     placeholders (berth.dev/ labels only), never one its own Services
//     would send requests to.
//
// The end-to-end tests install them with the RBAC of config/rbac; this
// package's tests check each promise against the real API server.
package policy

import "embed"

// Files holds the manifests.
//
//go:embed *.yaml
var Files embed.FS
