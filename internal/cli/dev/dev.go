// Package dev implements `berth dev`: a real local control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, KWOK) as local
// processes, for development, demos and tests.
package dev

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/devenv"
)

// DefaultDir is the state folder of `berth dev`, relative to the current
// folder.
const DefaultDir = ".berth/dev"

type options struct {
	dir     string
	binDir  string
	timeout time.Duration
}

// NewCommand returns `berth dev` with its subcommands.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a real local Kubernetes control plane (no Docker)",
		Long: `berth dev runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and KWOK (fake kubelets for nodes annotated kwok.x-k8s.io/node=fake) as local
processes on free loopback ports, with certificates, a kubeconfig and logs in
the state folder. The binaries are built from Go modules on first use
(hack/controlplane) and cached in .cache/controlplane/<versions>.`,
	}
	cmd.PersistentFlags().StringVar(&o.dir, "dir", DefaultDir, "state folder (certificates, kubeconfig, logs, etcd data)")
	cmd.PersistentFlags().StringVar(&o.binDir, "bin-dir", "", "folder with prebuilt control-plane binaries (default: build them in this checkout)")
	cmd.PersistentFlags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for each component to become healthy")
	cmd.AddCommand(o.upCommand(), o.downCommand(), o.statusCommand(), o.buildCommand(), o.demoCommand(), o.interruptCommand())
	return cmd
}

func (o *options) binaries(cmd *cobra.Command) (devenv.Binaries, devenv.Versions, error) {
	if o.binDir != "" {
		return devenv.Binaries{Dir: o.binDir}, devenv.Versions{}, nil
	}
	root, err := devenv.FindRoot(".")
	if err != nil {
		return devenv.Binaries{}, devenv.Versions{}, err
	}
	return devenv.EnsureBinaries(cmd.Context(), root, cmd.ErrOrStderr())
}

// running loads the control plane of the state folder, or says how to
// start one.
func (o *options) running() (*devenv.Cluster, error) {
	c, err := devenv.Load(o.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no local control plane in %s (start one with `berth dev up`)", o.dir)
	}
	return c, err
}

func (o *options) buildCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "build",
		Short: "Build the control-plane binaries unless they are built already",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bins, v, err := o.binaries(cmd)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "control plane %s ready in %s\n", v.Key(), bins.Dir)
			return nil
		},
	}
}

func (o *options) upCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "Start the local control plane (exits 0 if it already runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bins, v, err := o.binaries(cmd)
			if err != nil {
				return err
			}
			start := time.Now()
			c, err := devenv.Start(cmd.Context(), devenv.Options{
				Dir: o.dir, Binaries: bins, Versions: v, Detach: true,
				Progress: cmd.ErrOrStderr(), Timeout: o.timeout,
			})
			out := cmd.OutOrStdout()
			if errors.Is(err, devenv.ErrAlreadyRunning) {
				_, _ = fmt.Fprintf(out, "the local control plane in %s is already running\n", c.Dir)
				printUsage(out, o.dir)
				return nil
			}
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(out, "local control plane ready in %s (API server https://127.0.0.1:%d)\n", time.Since(start).Round(100*time.Millisecond), c.Ports.APIServer)
			printUsage(out, o.dir)
			return nil
		},
	}
}

func printUsage(w io.Writer, dir string) {
	kc := filepath.Join(dir, "kubeconfig")
	_, _ = fmt.Fprintf(w, "use it with:\n  export KUBECONFIG=%s\n  kubectl --kubeconfig %s get nodes,nodegroups\n", kc, kc)
}

func (o *options) downCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the processes `berth dev up` started and remove what it made in the state folder",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := devenv.Load(o.dir)
			if errors.Is(err, fs.ErrNotExist) {
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "no local control plane in %s\n", o.dir)
				return nil
			}
			if err != nil {
				return err
			}
			if err := c.Destroy(); err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "stopped %d components and removed what berth dev made in %s\n", len(c.Processes), o.dir)
			return nil
		},
	}
}

func (o *options) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each component's process and health; the log tail of failed ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.running()
			if err != nil {
				return err
			}
			sts, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), c, sts)
		},
	}
}

func printStatus(w io.Writer, c *devenv.Cluster, sts []devenv.ComponentStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE")
	failed := 0
	for _, st := range sts {
		state := "healthy"
		if st.Health != "" {
			state = st.Health
			failed++
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\n", st.Name, st.PID, state)
	}
	_ = tw.Flush()
	for _, st := range sts {
		if st.LogTail != "" {
			_, _ = fmt.Fprintf(w, "\n--- last lines of %s ---\n%s\n", st.LogFile, st.LogTail)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d components are not healthy", failed, len(sts))
	}
	_, _ = fmt.Fprintf(w, "kubeconfig: %s\n", c.KubeconfigPath())
	if _, err := os.Stat(c.KubeconfigPath()); err != nil {
		return err
	}
	return nil
}
