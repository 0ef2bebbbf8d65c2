// Package cli holds berth's command-line interface: one cobra command per
// verb, wired explicitly here.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/cli/cleanup"
	"github.com/berth-dev/berth/internal/cli/controller"
	"github.com/berth-dev/berth/internal/cli/dashboard"
	"github.com/berth-dev/berth/internal/cli/dev"
	"github.com/berth-dev/berth/internal/cli/explain"
	"github.com/berth-dev/berth/internal/cli/plan"
	"github.com/berth-dev/berth/internal/cli/record"
	"github.com/berth-dev/berth/internal/cli/simulate"
	"github.com/berth-dev/berth/internal/cli/tenant"
	"github.com/berth-dev/berth/internal/version"
)

// PluginName is the name kubectl finds berth under as a plugin: a binary
// kubectl-berth on the PATH runs as `kubectl berth`.
const PluginName = "kubectl-berth"

// NewRoot returns the berth root command with every subcommand.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "berth keeps capacity ready before pods ask for it",
		Long:          "berth is a headroom-aware, pod-driven node autoscaler for Kubernetes.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "version",
			Short: "Print the berth version",
			Args:  cobra.NoArgs,
			Run: func(cmd *cobra.Command, _ []string) {
				_, _ = fmt.Fprintln(cmd.OutOrStdout(), "berth", version.String())
			},
		},
		cleanup.NewCommand(),
		controller.NewCommand(),
		dashboard.NewCommand(),
		dev.NewCommand(),
		explain.NewCommand(),
		plan.NewCommand(),
		record.NewCommand(),
		simulate.NewCommand(),
		simulate.NewTraceCommand(),
		tenant.NewCommand(),
	)
	return root
}

// Execute runs the root command with a context cancelled on SIGINT/SIGTERM
// and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRoot()
	AsInvoked(root, os.Args[0])
	if err := root.ExecuteContext(ctx); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// AsInvoked makes help and usage name the command as the user typed it:
// `kubectl berth ...` when the binary runs as the kubectl plugin
// kubectl-berth (kubectl runs the plugin with its own path as argv[0]).
func AsInvoked(root *cobra.Command, argv0 string) {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") != PluginName {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl berth"
}
