//go:build tools

// Package clusterapi pins the Cluster API core manager, built with
// `go build sigs.k8s.io/cluster-api/core` in this module.
package clusterapi

import _ "sigs.k8s.io/cluster-api/core"
