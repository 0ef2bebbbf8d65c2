// Package repo tests the repository's own tooling (make targets) on a
// fresh clone, as CI runs it.
package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/devenv"
)

// TestVerifyFailsOnStaleGeneratedFiles clones the committed tree, changes
// a validation marker without regenerating, and expects `make verify` to
// fail naming the stale CRD, and to pass on the untouched clone.
func TestVerifyFailsOnStaleGeneratedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and runs make")
	}
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command("git", "clone", "--quiet", "--local", root, clone).CombinedOutput(); err != nil {
		t.Skipf("cannot clone the repository (no commits yet?): %v\n%s", err, out)
	}
	verify := func() (string, error) {
		cmd := exec.Command("make", "--no-print-directory", "verify")
		cmd.Dir = clone
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil {
		t.Fatalf("make verify fails on a clean clone: %v\n%s", err, out)
	}

	types := filepath.Join(clone, "api/v1alpha1/nodegroup_types.go")
	src, err := os.ReadFile(types)
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(src), "validation:Maximum=10000", "validation:Maximum=20000", 1)
	if stale == string(src) {
		t.Fatal("marker to change not found; update this test")
	}
	if err := os.WriteFile(types, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := verify()
	if err == nil {
		t.Fatalf("make verify passes with a stale CRD:\n%s", out)
	}
	if !strings.Contains(out, "config/crd/bases/berth.dev_nodegroups.yaml") {
		t.Errorf("make verify does not name the stale CRD:\n%s", out)
	}
}

// TestLayeringCheckFailsOnAnImpureDependency clones the committed tree, makes a
// pure package import internal/notify (which uses controller-runtime; a
// direct-import linter would not see it), and expects the check `make verify` runs to
// fail naming the package and the dependency.
func TestLayeringCheckFailsOnAnImpureDependency(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and runs make")
	}
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command("git", "clone", "--quiet", "--local", root, clone).CombinedOutput(); err != nil {
		t.Skipf("cannot clone the repository (no commits yet?): %v\n%s", err, out)
	}
	bad := "package headroom\n\nimport _ \"github.com/berth-dev/berth/internal/notify\"\n"
	if err := os.WriteFile(filepath.Join(clone, "internal/headroom/impure.go"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("hack/check-layering.sh")
	cmd.Dir = clone
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the layering check passes with internal/headroom depending on controller-runtime:\n%s", out)
	}
	if !strings.Contains(string(out), "pure package github.com/berth-dev/berth/internal/headroom depends on sigs.k8s.io/controller-runtime") {
		t.Errorf("the layering check does not name the package and the dependency:\n%s", out)
	}
}

// TestLayeringCheckFailsWhenAControllerReachesAnother clones the committed
// tree, makes one controller import the webhook and another controller,
// and expects the layering check to name both.
func TestLayeringCheckFailsWhenAControllerReachesAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and runs the layering check")
	}
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command("git", "clone", "--quiet", "--local", root, clone).CombinedOutput(); err != nil {
		t.Skipf("cannot clone the repository (no commits yet?): %v\n%s", err, out)
	}
	bad := "package nodegroup\n\nimport (\n\t_ \"github.com/berth-dev/berth/internal/controller/tenant\"\n\t_ \"github.com/berth-dev/berth/internal/webhook\"\n)\n"
	if err := os.WriteFile(filepath.Join(clone, "internal/controller/nodegroup/reach.go"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("hack/check-layering.sh")
	cmd.Dir = clone
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the layering check passes with a controller importing another and the webhook:\n%s", out)
	}
	for _, want := range []string{"controller github.com/berth-dev/berth/internal/controller/nodegroup depends on controller github.com/berth-dev/berth/internal/controller/tenant",
		"controller github.com/berth-dev/berth/internal/controller/nodegroup depends on github.com/berth-dev/berth/internal/webhook"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the layering check does not say %q:\n%s", want, out)
		}
	}
}
