// Package helmchart runs the pinned Helm (hack/helm/go.mod, `go tool`) on
// berth's chart for tests: render it, lint it, install and uninstall it.
// Helm is built from its Go module on first use and cached by the go
// command; no binary is downloaded.
package helmchart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Namespace is the only namespace the chart installs into.
const Namespace = "berth-system"

// Chart is the chart's path in the repository.
const Chart = "charts/berth"

// Helm runs `helm args...` from the repository root and returns its
// combined output.
func Helm(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "-modfile=" + filepath.Join(root, "hack", "helm", "go.mod"), "helm"}, args...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Render returns the objects `helm template` renders with the given
// extra arguments (e.g. "--set", "replicas=3"), CRDs included.
func Render(ctx context.Context, root string, args ...string) ([]*unstructured.Unstructured, error) {
	out, err := Helm(ctx, root, append([]string{"template", "berth", Chart, "--namespace", Namespace, "--include-crds"}, args...)...)
	if err != nil {
		return nil, err
	}
	return Decode([]byte(out))
}

// Decode reads the objects of a multi-document YAML stream.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
