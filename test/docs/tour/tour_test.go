// Package tour runs the README's five-minute tour, command by command as a
// reader would type them, against a real control plane with the demo
// installed and berth's controller running.
package tour

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// tourRE finds the shell block that follows the README's tour marker.
var tourRE = regexp.MustCompile("(?s)<!-- tour[^>]*-->\\s*```sh\\n(.*?)```")

// Tour returns the commands of the README's tour block.
func Tour(readme string) []string {
	m := tourRE.FindStringSubmatch(readme)
	if m == nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(m[1], "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func TestTheREADMEsTourRuns(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("the tour needs kubectl on PATH, as a reader needs it")
	}
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := Tour(string(readme))
	if len(steps) < 5 {
		t.Fatalf("README.md has no tour block of commands (found %d)", len(steps))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// The reader's folder: bin/berth as `make run` builds it, and
	// .berth/dev/kubeconfig of the running control plane.
	dir := t.TempDir()
	berth := filepath.Join(dir, "bin", "berth")
	run(ctx, t, root, nil, "go", "build", "-o", berth, "./cmd/berth")
	must(t, os.MkdirAll(filepath.Join(dir, ".berth", "dev"), 0o755))
	must(t, os.Symlink(env.Cluster.KubeconfigPath(), filepath.Join(dir, ".berth", "dev", "kubeconfig")))
	run(ctx, t, dir, nil, berth, "dev", "demo", "--dir", env.Cluster.Dir)
	startController(ctx, t, berth)

	shell := []string{"PATH=" + filepath.Dir(kubectl) + ":" + os.Getenv("PATH"), "HOME=" + dir}
	for _, step := range steps {
		start := time.Now()
		out := run(ctx, t, dir, shell, "bash", "-c", "set -euo pipefail; export KUBECONFIG=$PWD/.berth/dev/kubeconfig; "+step)
		t.Logf("$ %s   (%s)\n%s", step, time.Since(start).Round(100*time.Millisecond), out)
	}
}

// startController runs `bin/berth controller` as `make run` does, on
// ports of its own, until the test ends.
func startController(ctx context.Context, t *testing.T, berth string) {
	t.Helper()
	cctx, stop := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, berth, "controller", "--kubeconfig", env.Cluster.KubeconfigPath(), "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--webhook-bind-address", "0", "--zap-log-level", "error")
	logs, err := os.Create(filepath.Join(t.TempDir(), "controller.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logs, logs
	must(t, cmd.Start())
	t.Cleanup(func() {
		stop()
		_ = cmd.Wait()
		if t.Failed() {
			data, _ := os.ReadFile(logs.Name())
			t.Logf("controller log:\n%s", data)
		}
	})
}

// run runs a command in dir and fails the test with its output if it fails.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
