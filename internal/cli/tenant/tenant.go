// Package tenant implements `berth tenant`: create, list and delete
// Tenants and list TenantTypes on a live cluster, with the input checked
// before anything is created and `--wait` following the tenant's status.
package tenant

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/cli/clusterflags"
	"github.com/berth-dev/berth/internal/cli/output"
)

// options are the flags every `berth tenant` command shares.
type options struct {
	cluster clusterflags.Flags
	// pollInterval is how often --wait reads the tenant.
	pollInterval time.Duration
}

// NewCommand returns `berth tenant` and its subcommands.
func NewCommand() *cobra.Command {
	o := &options{pollInterval: time.Second}
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Create, list and delete tenants: one pod each, on a node of its type's node group",
		Long: `A TenantType names the node group its tenants run on, whether each gets a
node of its own, its container and Service, and default configuration. A
Tenant names its type and may override configuration values; berth runs it
in the namespace tenant-<name> and launches the node it needs.`,
	}
	o.cluster.Bind(cmd.PersistentFlags())
	cmd.AddCommand(o.createCommand(), o.listCommand(), o.deleteCommand(), o.typesCommand())
	return cmd
}

// client connects to the cluster of the kubeconfig and context, as
// kubectl would.
func (o *options) client() (client.Client, error) { return o.cluster.Client() }

func (o *options) createCommand() *cobra.Command {
	var (
		typ     string
		sets    []string
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create NAME --type TYPE [--set KEY=VALUE]... [--wait] [--timeout 5m]",
		Short: "Create a tenant of a type; with --wait, follow it until it runs",
		Long: `Checks, before creating anything, that NAME is a DNS label of at most 56
characters, that the type and its node group exist and that no tenant of
that name exists. With --wait it prints each change of the tenant's phase
and reason (berth launching a node for it, or why it cannot) until the
tenant runs, and fails with the last reason when --timeout passes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			config, err := ParseSets(sets)
			if err != nil {
				return err
			}
			if err := ValidateName(args[0]); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			t, err := Create(cmd.Context(), c, args[0], typ, config)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "tenant %s created (type %s, namespace %s)\n", t.Name, t.Spec.Type, t.TenantNamespace())
			if !wait {
				return nil
			}
			return WaitRunning(cmd.Context(), c, t.Name, cmd.OutOrStdout(), o.pollInterval, timeout)
		},
	}
	cmd.Flags().StringVarP(&typ, "type", "t", "", "tenant type (berth tenant types lists them)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "configuration value KEY=VALUE overriding the type's (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the tenant runs, printing its progress")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

func (o *options) listCommand() *cobra.Command {
	var format output.Format
	cmd := &cobra.Command{
		Use:     "list [-o table|json|yaml]",
		Aliases: []string{"ls"},
		Short:   "List tenants with their type, phase, node and node group",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := format.Check(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			return List(cmd.Context(), c, cmd.OutOrStdout(), format, time.Now())
		},
	}
	format.Bind(cmd.Flags())
	return cmd
}

func (o *options) deleteCommand() *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "delete NAME... [--wait] [--timeout 5m]",
		Short: "Delete tenants with their namespace; with --wait, until they and their pods are gone",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			// Every name is tried: one that does not exist stops none of
			// the others.
			var errs []error
			nodes := map[string]string{}
			for _, name := range args {
				node, err := Delete(cmd.Context(), c, name)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				nodes[name] = node
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "tenant %s deleted\n", name)
			}
			if wait {
				for _, name := range args {
					if node, ok := nodes[name]; ok {
						errs = append(errs, WaitGone(cmd.Context(), c, name, node, cmd.OutOrStdout(), o.pollInterval, timeout))
					}
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until each tenant and its pod are gone")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits for each tenant")
	return cmd
}

func (o *options) typesCommand() *cobra.Command {
	var format output.Format
	cmd := &cobra.Command{
		Use:   "types [-o table|json|yaml]",
		Short: "List tenant types with their node group and shape",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := format.Check(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			return ListTypes(cmd.Context(), c, cmd.OutOrStdout(), format)
		},
	}
	format.Bind(cmd.Flags())
	return cmd
}
