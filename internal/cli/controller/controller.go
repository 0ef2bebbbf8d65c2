// Package controller implements `berth controller`, the controller manager:
// provisioning, node group status and launch timeouts, with leader
// election, Prometheus metrics, health probes and graceful shutdown.
package controller

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/berth-dev/berth/internal/cli/limitflags"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/netaddr"
	"github.com/berth-dev/berth/internal/scheme"
)

type options struct {
	kubeconfig        string
	metricsAddr       string
	metricsSecure     bool
	scaleDown         bool
	scaleDownInterval time.Duration
	deletionDelay     time.Duration
	leaseDuration     time.Duration
	renewDeadline     time.Duration
	retryPeriod       time.Duration
	probeAddr         string
	pprofAddr         string
	leaderElect       bool
	leaderNamespace   string
	batchIdle         time.Duration
	batchMax          time.Duration
	resync            time.Duration
	maxProvisionTime  time.Duration
	unavailableTTL    time.Duration
	clusterLimits     limitflags.ClusterLimits
	shutdownTimeout   time.Duration
	cacheSyncTimeout  time.Duration
	qps               float32
	burst             int
	webhookAddr       string
	webhookURL        string
	webhookService    string
	pauseImage        string
	zap               zap.Options
	clusterAPI        bool
	clusterAPIConfig  string
	targetMinHistory  time.Duration
}

// NewCommand returns `berth controller`.
func NewCommand() *cobra.Command { return newCommand(&options{zap: zap.Options{Development: false}}) }

// newCommand binds the command's flags to o.
func newCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the berth controller manager against a cluster",
		Long: `berth controller watches pods the scheduler cannot place and launches the
cheapest nodes that fit them, keeps NodeGroup status up to date and replaces
nodes that do not become Ready in time. It serves Prometheus metrics and
health probes, and elects a leader so that several replicas can run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config or in-cluster)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint (0 disables it)")
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and authorizes (get on the /metrics non-resource URL); false only on a loopback address")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a non-leader waits before it takes over an unrenewed lease")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops acting")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (0: off); serves heap and CPU profiles without authentication, so bind a loopback address and port-forward")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that only one replica acts")
	f.StringVar(&o.leaderNamespace, "leader-election-namespace", "berth-system", "namespace of the leader election lease")
	f.DurationVar(&o.batchIdle, "batch-idle-duration", time.Second, "a batch of pending pods ends when none arrived for this long")
	f.DurationVar(&o.batchMax, "batch-max-duration", 10*time.Second, "a batch of pending pods ends this long after it started at the latest")
	f.DurationVar(&o.resync, "resync-period", 30*time.Second, "plan at least this often, even without events")
	f.DurationVar(&o.maxProvisionTime, "max-provision-time", 15*time.Minute, "delete and replace a launched node that is not Ready after this long")
	f.BoolVar(&o.scaleDown, "scale-down", true, "remove nodes of berth's node groups that are no longer needed (each group tunes it in spec.disruption)")
	f.DurationVar(&o.scaleDownInterval, "scale-down-interval", 10*time.Second, "how often scale-down plans")
	f.DurationVar(&o.deletionDelay, "node-deletion-delay-timeout", disruption.DefaultDeletionDelayTimeout, "how long a drained node's removal waits for another controller to remove its delay-deletion.cluster-autoscaler.kubernetes.io/* annotations, as Cluster Autoscaler does (0: not waited for)")
	f.DurationVar(&o.unavailableTTL, "unavailable-offering-ttl", 3*time.Minute, "how long an offering that failed to launch is not used")
	f.DurationVar(&o.targetMinHistory, "headroom-target-min-history", demand.MinHistory, "how long berth watches a Headroom's bursts before its target sizes the units (until then spec.units and automatic apply)")
	o.clusterLimits.Bind(f)
	f.BoolVar(&o.clusterAPI, "clusterapi", false, "serve NodeGroups with spec.provider.clusterAPI: scale Cluster API MachineDeployments, MachineSets and MachinePools")
	f.StringVar(&o.clusterAPIConfig, "clusterapi-kubeconfig", "", "kubeconfig of the Cluster API management cluster (default: the cluster berth runs against); implies --clusterapi")
	f.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "how long to wait for controllers to stop")
	f.DurationVar(&o.cacheSyncTimeout, "cache-sync-timeout", 10*time.Minute, "how long a controller waits at start for its informers to list the cluster before berth exits (a slow API server takes minutes to list 150,000 pods)")
	f.Float32Var(&o.qps, "kube-api-qps", 200, "sustained requests per second to the API server, per kind of object (nominating 1000 pods is 1000 requests)")
	f.IntVar(&o.burst, "kube-api-burst", 300, "requests allowed in a burst above --kube-api-qps, per kind of object")
	f.StringVar(&o.webhookAddr, "webhook-bind-address", ":9443", "address of the admission webhook that gates pods a CompanionProfile selects (0 disables it)")
	f.StringVar(&o.webhookURL, "webhook-url", "", "base URL the API server calls the webhook at (https://127.0.0.1:9443 when berth runs outside the cluster); empty: --webhook-service")
	f.StringVar(&o.webhookService, "webhook-service", "berth-system/berth-controller-webhook", "namespace/name of the Service in front of the webhook (port 443)")
	f.StringVar(&o.pauseImage, "pause-image", "registry.k8s.io/pause:3.10", "image of berth's placeholder and per-node reserve pods (Headroom and companion placeholders, node reserves)")
	gfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(gfs)
	f.AddGoFlagSet(gfs)
	return cmd
}

func (o *options) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	return cfg, nil
}

func (o *options) validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"--batch-idle-duration": o.batchIdle, "--batch-max-duration": o.batchMax,
		"--resync-period": o.resync, "--max-provision-time": o.maxProvisionTime, "--scale-down-interval": o.scaleDownInterval, "--unavailable-offering-ttl": o.unavailableTTL,
		"--headroom-target-min-history": o.targetMinHistory, "--cache-sync-timeout": o.cacheSyncTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %s", name, d))
		}
	}
	if o.deletionDelay < 0 {
		errs = append(errs, fmt.Errorf("--node-deletion-delay-timeout must not be negative, not %s", o.deletionDelay))
	}
	if o.qps <= 0 || o.burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%g) and --kube-api-burst (%d) must be positive", o.qps, o.burst))
	}
	if o.leaseDuration <= o.renewDeadline || o.renewDeadline <= o.retryPeriod || o.retryPeriod <= 0 {
		errs = append(errs, fmt.Errorf("leader election needs lease duration (%s) > renew deadline (%s) > retry period (%s) > 0",
			o.leaseDuration, o.renewDeadline, o.retryPeriod))
	}
	if !o.metricsSecure && !netaddr.Loopback(o.metricsAddr) {
		errs = append(errs, fmt.Errorf("--metrics-secure=false serves metrics to anyone who can reach %q; bind them to a loopback address (127.0.0.1:8080) or keep them secure", o.metricsAddr))
	}
	if !netaddr.Loopback(o.pprofAddr) {
		errs = append(errs, fmt.Errorf("--pprof-bind-address %q serves profiles without authentication to anyone who can reach it; bind a loopback address (127.0.0.1:6060) and port-forward", o.pprofAddr))
	}
	if o.webhookURL != "" && !strings.HasPrefix(o.webhookURL, "https://") {
		errs = append(errs, fmt.Errorf("--webhook-url %q must start with https://", o.webhookURL))
	}
	if ns, name, ok := strings.Cut(o.webhookService, "/"); o.webhookURL == "" && (!ok || ns == "" || name == "") {
		errs = append(errs, fmt.Errorf("--webhook-service %q must be namespace/name", o.webhookService))
	}
	if o.batchIdle > o.batchMax {
		errs = append(errs, fmt.Errorf("--batch-idle-duration (%s) must not exceed --batch-max-duration (%s)", o.batchIdle, o.batchMax))
	}
	return errors.Join(errs...)
}

func (o *options) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := setSoftMemoryLimit(os.Getenv); err != nil {
		return err
	}
	limits, err := o.clusterLimits.Limits()
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	shutdown := o.shutdownTimeout
	hook, err := o.webhook(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           hook.server(),
		Scheme:                  scheme.New(),
		Cache:                   cache.Options{DefaultTransform: newTrimmer().trim}, // what berth never reads is not kept
		Metrics:                 o.metricsOptions(),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "berth-controller",
		LeaderElectionNamespace: o.leaderNamespace,
		// A replica that stops cleanly hands over at once instead of
		// making the next one wait for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		GracefulShutdownTimeout:       &shutdown,
		// controller-runtime's default, 2 minutes, is shorter than a
		// loaded API server takes to list a large cluster's pods.
		Controller: config.Controller{CacheSyncTimeout: o.cacheSyncTimeout},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the informer caches have synced (listing a large
	// cluster's pods takes minutes): ready before, a new replica let a
	// rollout or a drain take the last old one, the leader, and no replica
	// could lead until the new one had listed everything.
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr.GetCache())); err != nil {
		return err
	}
	if hook.server() != nil {
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	if err := o.wire(mgr, limits, hook); err != nil {
		return err
	}
	ctrl.Log.Info("starting berth controller", "leaderElection", o.leaderElect, "metrics", o.metricsAddr, "probes", o.probeAddr,
		"batchIdle", o.batchIdle.String(), "batchMax", o.batchMax.String(), "maxProvisionTime", o.maxProvisionTime.String())
	return mgr.Start(cmd.Context())
}

// metricsOptions serves metrics over HTTPS behind the API server's
// authentication and authorization (as Kubebuilder projects do; a
// self-signed certificate unless one is mounted), or in plain HTTP on a
// loopback address for local runs.
func (o *options) metricsOptions() metricsserver.Options {
	if !o.metricsSecure {
		return metricsserver.Options{BindAddress: o.metricsAddr}
	}
	return metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}

// cachesSynced is a readiness check that passes once every informer the
// cache started has synced.
func cachesSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 200*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informer caches have not synced yet")
		}
		return nil
	}
}
