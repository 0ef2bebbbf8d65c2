package browsertest

import (
	"context"
	"testing"

	"github.com/berth-dev/berth/internal/cli/controller"
)

// runController runs `berth controller` in this process against the
// test's control plane until ctx ends.
func runController(ctx context.Context, t *testing.T) {
	t.Helper()
	cmd := controller.NewCommand()
	cmd.SetArgs([]string{"--kubeconfig", env.Cluster.KubeconfigPath(), "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--webhook-bind-address", "0",
		"--scale-down=false", "--batch-idle-duration", "200ms", "--zap-log-level", "error"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("berth controller: %v", err)
		}
	})
}
