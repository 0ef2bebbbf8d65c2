// Command crdversions adds to the CapacityBuffer CRD controller-gen wrote
// (autoscaling.x-k8s.io, version v1beta1) the deprecated version v1alpha1
// Cluster Autoscaler's CRD also serves, with the same schema and no
// conversion (the API server only rewrites apiVersion): manifests and
// clients written for v1alpha1 keep working where berth's CRD is
// installed, and a cluster that stored buffers through Cluster
// Autoscaler's CRD can take berth's as an update. The objects are stored
// as v1beta1.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

const (
	file    = "autoscaling.x-k8s.io_capacitybuffers.yaml"
	served  = "v1beta1"
	older   = "v1alpha1"
	warning = "autoscaling.x-k8s.io/v1alpha1 CapacityBuffer is deprecated; use autoscaling.x-k8s.io/v1beta1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdversions DIR")
		os.Exit(2)
	}
	path := strings.TrimSuffix(os.Args[1], "/") + "/" + file
	in, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crdversions: %v\n", err)
		os.Exit(1)
	}
	out, err := withOlder(in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crdversions: %s: %v\n", path, err)
		os.Exit(1)
	}
	if bytes.Equal(in, out) {
		return
	}
	if err := os.WriteFile(path, out, 0o644); err != nil { //nolint:gosec // a generated file in the repository, as controller-gen writes it
		fmt.Fprintf(os.Stderr, "crdversions: %v\n", err)
		os.Exit(1)
	}
}

// withOlder appends to the CRD's one version (the last part of the file,
// from "  versions:\n") a copy named older, served, not stored and
// deprecated. A CRD that already has it is returned as it is.
func withOlder(crd []byte) ([]byte, error) {
	s := string(crd)
	if strings.Contains(s, "\n    name: "+older+"\n") {
		return crd, nil
	}
	_, version, ok := strings.Cut(s, "\n  versions:\n")
	if !ok || strings.Count(version, "\n  - ") != 0 || !strings.HasPrefix(version, "  - ") {
		return nil, fmt.Errorf("want one version under spec.versions")
	}
	copied := version
	for _, r := range []struct{ from, to string }{
		{"\n    name: " + served + "\n", "\n    name: " + older + "\n"},
		{"\n    storage: true\n", "\n    storage: false\n"},
	} {
		if !strings.Contains(copied, r.from) {
			return nil, fmt.Errorf("the version has no %q", strings.TrimSpace(r.from))
		}
		copied = strings.Replace(copied, r.from, r.to, 1)
	}
	copied = strings.Replace(copied, "  - ", "  - deprecated: true\n    deprecationWarning: '"+warning+"'\n    ", 1)
	return []byte(s + copied), nil
}
