// Package dashboard implements `berth dashboard`: a read-only web page of
// the live cluster (node groups, headroom, pending pods, disruption,
// decisions, the last hour), served from files embedded in the binary.
package dashboard

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/berth-dev/berth/internal/cli/clusterflags"
	"github.com/berth-dev/berth/internal/dashboard"
	"github.com/berth-dev/berth/internal/netaddr"
	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/scheme"
)

// DefaultAddress is where the dashboard listens unless told otherwise:
// loopback only, since the page has no authentication of its own.
const DefaultAddress = "127.0.0.1:8090"

// NewCommand returns `berth dashboard`.
func NewCommand() *cobra.Command {
	var (
		cluster  clusterflags.Flags
		address  string
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "dashboard [--address 127.0.0.1:8090] [--interval 5s]",
		Short: "Serve a live, read-only web page of node groups, headroom, pending pods and berth's decisions",
		Long: `berth dashboard watches the cluster (with your kubeconfig's credentials; it
only reads) and serves a web page that updates itself: node groups with their
nodes by instance type, zone and capacity type and their cost per hour;
headroom desired and ready, per Headroom and per-node reserve; pending pods and
what berth does about each; nodes being drained, replaced or kept, and why;
berth's recent decisions; and charts of the last hour, sampled while it runs.
The page's files are compiled into berth: it loads nothing from elsewhere.
It has no authentication of its own: keep it on a loopback address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < time.Second {
				return fmt.Errorf("--interval must be at least 1s, not %s", interval)
			}
			if !netaddr.Loopback(address) {
				return fmt.Errorf("--address %q serves the page without authentication to anyone who can reach it; bind a loopback address (%s) and port-forward", address, DefaultAddress)
			}
			cfg, err := cluster.RESTConfig()
			if err != nil {
				return err
			}
			// Quantities are bounded as the controller's cache bounds them.
			c, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultTransform: func(obj any) (any, error) {
				quantity.BoundObject(obj)
				return obj, nil
			}})
			if err != nil {
				return fmt.Errorf("watching the cluster: %w", err)
			}
			ln, err := net.Listen("tcp", address)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			go func() { _ = c.Start(ctx) }()
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "berth dashboard on http://%s (Ctrl-C stops it)\n", ln.Addr())
			return dashboard.Serve(ctx, ln, c, interval)
		},
	}
	cluster.Bind(cmd.Flags())
	cmd.Flags().StringVar(&address, "address", DefaultAddress, "address to serve the page on")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "how often the page and the charts are refreshed")
	return cmd
}
