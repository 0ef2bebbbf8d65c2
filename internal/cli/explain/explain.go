// Package explain implements `berth explain pod NS/NAME` and `berth
// explain node NAME`: it reads the cluster from the API server, runs the
// same planners as the controller (scale-up for a pod, scale-down for a
// node) and prints the decision, the rule behind it and what the user can
// change to get a different outcome, in words or as JSON/YAML.
package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/cli/limitflags"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/scheme"
)

// options are the flags every `berth explain` command shares.
type options struct {
	kubeconfig string
	context    string
	namespace  string
	output     string
	limits     limitflags.ClusterLimits
	grace      time.Duration
	// clusterAPI and clusterAPIConfig are the controller's flags of the
	// same names: node groups of spec.provider.clusterAPI are planned as
	// their Cluster API objects' annotations and templates say.
	clusterAPI       bool
	clusterAPIConfig string
}

// NewCommand returns `berth explain` and its subcommands.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Say why berth launches a node for a pod or not, and why it removes a node or keeps it",
		Long: `berth explain reads the cluster from the API server and runs the planners
the controller runs on it: scale-up for a pod, scale-down for a node. It
prints the decision, the rule behind it, and what you can change to get a
different outcome, with what the running controller shows on the objects
(events, nomination, drain taint and annotations, conditions). It changes
nothing. What only the running controller knows (how long a node has been
removable, launches not registered yet) is named where it could change the
outcome.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config or in-cluster)")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use (default: the current context)")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, json or yaml")
	o.limits.Bind(f)
	f.DurationVar(&o.grace, "max-provision-time", scaleup.DefaultLaunchGrace,
		"the controller's --max-provision-time: how long a node of berth's that is not Ready counts as booting")
	f.BoolVar(&o.clusterAPI, "clusterapi", false, "the controller's --clusterapi: read the Cluster API objects of NodeGroups with spec.provider.clusterAPI (their annotations and machine templates), as the controller does")
	f.StringVar(&o.clusterAPIConfig, "clusterapi-kubeconfig", "", "the controller's --clusterapi-kubeconfig: kubeconfig of the Cluster API management cluster (default: the cluster explained); implies --clusterapi")
	cmd.AddCommand(o.podCommand(), o.nodeCommand())
	return cmd
}

func (o *options) podCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pod NAMESPACE/NAME",
		Short: "Say whether berth launches a node for the pod, which one, or why none can host it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := o.podKey(args[0])
			if err != nil {
				return err
			}
			return o.run(cmd, func(c client.Client, s Settings) (Explanation, error) {
				return Pod(cmd.Context(), c, key, s)
			})
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "default", "namespace of a pod given without one")
	return cmd
}

func (o *options) nodeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "node NAME",
		Short: "Say whether berth removes, replaces or disrupts the node, or which rule keeps it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, func(c client.Client, s Settings) (Explanation, error) {
				return Node(cmd.Context(), c, args[0], s)
			})
		},
	}
}

// run checks the flags, connects, explains and prints.
func (o *options) run(cmd *cobra.Command, explain func(client.Client, Settings) (Explanation, error)) error {
	write, ok := writers[o.output]
	if !ok {
		return fmt.Errorf("--output must be text, json or yaml, not %q", o.output)
	}
	limits, err := o.limits.Limits()
	if err != nil {
		return err
	}
	if o.grace <= 0 {
		return fmt.Errorf("--max-provision-time must be positive, not %s", o.grace)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	cloud, err := o.clusterAPIProvider(c)
	if err != nil {
		return err
	}
	e, err := explain(c, Settings{Limits: limits, LaunchGrace: o.grace, Now: time.Now(), Cloud: cloud})
	if err != nil {
		return err
	}
	return write(cmd.OutOrStdout(), e)
}

// podKey reads NAMESPACE/NAME, or NAME in --namespace.
func (o *options) podKey(arg string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		ns, name = o.namespace, arg
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("pod %q: want NAMESPACE/NAME", arg)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// client connects to the cluster of the kubeconfig and context, as kubectl
// would, without a cache: every read goes to the API server.
func (o *options) client() (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	// A dozen cluster-wide lists: more than client-go's default 5 per second.
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return clusterread.Bounded(c), nil
}

// clusterAPIProvider is the Cluster API provider the controller's flags
// of the same names give (nil without them), reading the management
// cluster without a cache.
func (o *options) clusterAPIProvider(c client.Client) (cloudprovider.CloudProvider, error) {
	if !o.clusterAPI && o.clusterAPIConfig == "" {
		return nil, nil
	}
	mgmt := c
	if o.clusterAPIConfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.clusterAPIConfig)
		if err != nil {
			return nil, fmt.Errorf("loading --clusterapi-kubeconfig: %w", err)
		}
		cfg.QPS, cfg.Burst = 50, 100 // as the explained cluster's client: two reads a group
		if mgmt, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
			return nil, fmt.Errorf("connecting to the Cluster API management cluster: %w", err)
		}
	}
	return clusterapi.New(c, mgmt, clock.RealClock{}), nil
}
