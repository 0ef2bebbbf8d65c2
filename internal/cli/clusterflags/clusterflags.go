// Package clusterflags holds the flags with which berth's commands reach a
// cluster, named and defaulted as kubectl's (--kubeconfig, --context), so
// that berth behaves the same run as `berth` or as `kubectl berth`.
package clusterflags

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/scheme"
)

// Flags are --kubeconfig and --context.
type Flags struct {
	Kubeconfig string
	Context    string
}

// Bind adds the flags to fs.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config or in-cluster)")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context to use (default: the current context)")
}

// RESTConfig loads the configuration kubectl would use with these flags.
func (f *Flags) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.Kubeconfig != "" {
		rules.ExplicitPath = f.Kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// Client connects without a cache: every read goes to the API server,
// with quantities bounded (clusterread.Bounded).
func (f *Flags) Client() (client.Client, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return clusterread.Bounded(c), nil
}
