// Package e2e drives the whole system: the berth binary brings up the local
// control plane (`berth dev up`) and the tests use it as a user would.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var (
	env *testenv.Env
	// berthBin is the berth binary built for this run.
	berthBin string
	root     string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping: end-to-end tests do not run with -short")
		os.Exit(0)
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	var err error
	root, err = devenv.FindRoot(".")
	if err != nil {
		return 1, err
	}
	tmp, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		return 1, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	berthBin = filepath.Join(tmp, "berth")
	if out, err := exec.Command("go", "build", "-o", berthBin, filepath.Join(root, "cmd/berth")).CombinedOutput(); err != nil {
		return 1, fmt.Errorf("building berth: %w\n%s", err, out)
	}
	// Build the control plane once (no-op when cached) so that the dev up
	// below only measures start-up.
	if _, _, err := devenv.EnsureBinaries(ctx, root, os.Stderr); err != nil {
		return 1, err
	}
	dir := filepath.Join(tmp, "dev")
	if out, err := berth("dev", "up", "--dir", dir); err != nil {
		return 1, fmt.Errorf("berth dev up: %w\n%s", err, out)
	}
	c, err := devenv.Load(dir)
	if err != nil {
		return 1, err
	}
	env, err = testenv.FromCluster(c)
	if err != nil {
		_ = c.Destroy()
		return 1, err
	}
	if err := installRBAC(ctx, env.Client, c, tmp); err != nil {
		_ = c.Destroy()
		return 1, fmt.Errorf("installing RBAC: %w", err)
	}
	code := m.Run()
	if out, err := berth("dev", "down", "--dir", dir); err != nil {
		return 1, fmt.Errorf("berth dev down: %w\n%s", err, out)
	}
	return code, nil
}

// berth runs the berth binary from the repository root and returns its
// combined output.
func berth(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, berthBin, args...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}
