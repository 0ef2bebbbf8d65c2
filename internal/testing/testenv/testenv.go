// Package testenv starts the real local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, KWOK) once per test package and
// stops it when the package's tests end. Controller and end-to-end tests use
// it instead of fakes:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
//
// Each package gets its own state folder and free loopback ports, so
// packages run in parallel without colliding. With -short the package's
// tests are skipped.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/scheme"
)

// Env is a running control plane and clients for it.
type Env struct {
	Cluster   *devenv.Cluster
	Config    *rest.Config
	Client    client.Client
	Clientset kubernetes.Interface
}

// Main starts the control plane, stores it in *env, runs the tests, stops
// the control plane and exits with the tests' code.
func Main(m *testing.M, env **Env) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping: tests against a real control plane do not run with -short")
		os.Exit(0)
	}
	e, err := Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Start builds the control-plane binaries if needed and starts a control
// plane in a fresh temporary folder.
func Start(ctx context.Context) (*Env, error) {
	root, err := devenv.FindRoot(".")
	if err != nil {
		return nil, err
	}
	bins, v, err := devenv.EnsureBinaries(ctx, root, os.Stderr)
	if err != nil {
		return nil, err
	}
	// A port found free can be taken before its component binds it (by
	// another test binary's connection: packages run in parallel), and
	// that component then fails to start: start again, on other ports.
	for attempt := 1; ; attempt++ {
		dir, err := os.MkdirTemp("", "berth-testenv-")
		if err != nil {
			return nil, err
		}
		c, err := devenv.Start(ctx, devenv.Options{Dir: dir, Binaries: bins, Versions: v, Timeout: 3 * time.Minute})
		if err == nil {
			return FromCluster(c)
		}
		_ = os.RemoveAll(dir)
		if attempt == startAttempts {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "testenv: starting the control plane failed (%v); starting it again on other ports\n", err)
	}
}

// startAttempts bounds how often Start tries a control plane.
const startAttempts = 3

// FromCluster builds clients for a running cluster.
func FromCluster(c *devenv.Cluster) (*Env, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	// Tests poll (expect.Eventually) and create many objects; with
	// client-go's default 5 requests per second a slow machine queues them
	// until a poll's deadline passes ("rate: Wait(n=1) would exceed context
	// deadline") and the test reports that instead of the cluster's state.
	cfg.QPS, cfg.Burst = 200, 400
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Cluster: c, Config: cfg, Client: cl, Clientset: cs}, nil
}

// Stop stops the control plane and removes its folder.
func (e *Env) Stop() error { return e.Cluster.Destroy() }

// WatchingClient is a new client of the control plane that can also watch,
// the kind interceptor.NewClient wraps: tests build one to stand for a
// cache that lags or keeps less, or an API server that fails.
func (e *Env) WatchingClient(t testing.TB) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(e.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
