// Package devenv runs a real local Kubernetes control plane as processes:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK
// (fake kubelets), built from Go modules by hack/controlplane. It is what
// `berth dev up` and every controller and end-to-end test use.
package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// stateFile records a running cluster inside its folder.
const stateFile = "state.json"

// ErrAlreadyRunning is returned by Start when the folder holds a cluster
// whose processes all run.
var ErrAlreadyRunning = errors.New("the local control plane is already running")

// Cluster is a local control plane: its folder, ports and processes.
type Cluster struct {
	Dir       string     `json:"dir"`
	Versions  Versions   `json:"versions"`
	Ports     Ports      `json:"ports"`
	Processes []*Process `json:"processes"`
	StartedAt time.Time  `json:"startedAt"`
}

// Options configure Start.
type Options struct {
	// Dir is the state folder (certificates, kubeconfig, logs, etcd data).
	Dir string
	// Binaries and Versions come from EnsureBinaries.
	Binaries Binaries
	Versions Versions
	// Detach lets the processes outlive this program (berth dev up). When
	// false they die with it (tests).
	Detach bool
	// Progress receives one line per step; nil discards it.
	Progress io.Writer
	// Timeout bounds the wait for each component to become healthy.
	Timeout time.Duration
}

// KubeconfigPath is the admin kubeconfig of the cluster.
func (c *Cluster) KubeconfigPath() string { return filepath.Join(c.Dir, "kubeconfig") }

// Start brings up a control plane in opts.Dir. If the folder already holds a
// running cluster it returns that cluster and ErrAlreadyRunning; if it holds
// the remains of one whose processes are all gone, it starts afresh.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if old, err := Load(dir); err == nil {
		alive := old.aliveCount()
		switch {
		case alive == len(old.Processes):
			return old, ErrAlreadyRunning
		case alive > 0:
			return old, fmt.Errorf("the control plane in %s is partly down (%d of %d components run); run `berth dev status` to see why and `berth dev down` to clean up", dir, alive, len(old.Processes))
		}
		_, _ = fmt.Fprintf(opts.Progress, "removing the stopped control plane in %s\n", dir)
		if err := removeState(dir); err != nil {
			return nil, err
		}
	} else if other, err := othersIn(dir); err != nil {
		return nil, err
	} else if other != "" {
		return nil, fmt.Errorf("%s holds %s, which berth dev did not make: give an empty or new folder with --dir (berth dev down removes what it made there)", dir, other)
	}
	c := &Cluster{Dir: dir, Versions: opts.Versions, StartedAt: time.Now().UTC()}
	if err := c.prepare(); err != nil {
		return nil, err
	}
	procs, err := c.processes(opts.Binaries)
	if err != nil {
		return nil, err
	}
	if err := c.startAll(ctx, procs, opts); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// prepare creates the folder, certificates, ports and kubeconfig.
func (c *Cluster) prepare() error {
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := (pki{dir: filepath.Join(c.Dir, "pki")}).generate(); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	ports, err := allocatePorts()
	if err != nil {
		return err
	}
	c.Ports = ports
	return c.writeKubeconfig()
}

func (c *Cluster) startAll(ctx context.Context, procs []*Process, opts Options) error {
	client, err := newHealthClient(pki{dir: filepath.Join(c.Dir, "pki")})
	if err != nil {
		return err
	}
	// etcd and the API server start one after the other; the rest only
	// need the API server and start together.
	for i, p := range procs {
		if err := p.start(opts.Detach); err != nil {
			return err
		}
		c.Processes = append(c.Processes, p)
		if err := c.save(); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(opts.Progress, "started %s (pid %d)\n", p.Name, p.PID)
		if i < 2 {
			if err := waitHealthy(ctx, client, p, opts.Timeout); err != nil {
				return err
			}
		}
	}
	for _, p := range procs[2:] {
		if err := waitHealthy(ctx, client, p, opts.Timeout); err != nil {
			return err
		}
	}
	_, _ = fmt.Fprintln(opts.Progress, "all components healthy; waiting for the default service account and installing CRDs")
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	return finishSetup(ctx, cfg, opts.Timeout)
}

// Load reads the cluster recorded in dir.
func Load(dir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, stateFile), err)
	}
	return c, nil
}

func (c *Cluster) save() error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(c.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, stateFile))
}

func (c *Cluster) aliveCount() int {
	n := 0
	for _, p := range c.Processes {
		if p.Alive() {
			n++
		}
	}
	return n
}

// Stop stops the processes this cluster started, in reverse start order:
// the API server goes before etcd, because without etcd it can take a
// minute to exit.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.Processes) - 1; i >= 0; i-- {
		if err := c.Processes[i].stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Destroy stops the cluster and removes what it made in its folder, and
// the folder once nothing else is left in it.
func (c *Cluster) Destroy() error {
	if err := c.Stop(); err != nil {
		return err
	}
	return removeState(c.Dir)
}

// made are the entries of a cluster's folder that berth dev makes: the
// only ones it removes.
var made = map[string]bool{stateFile: true, stateFile + ".tmp": true, "kubeconfig": true, "logs": true, "pki": true, "etcd": true,
	"apiserver-certs": true, "kcm-certs": true, "scheduler-certs": true, "kube-scheduler.yaml": true, "kwok-stages.yaml": true}

// removeState removes what berth dev made in dir, and dir itself when
// nothing else is left in it: a user's own files there stay.
func removeState(dir string) error {
	var errs []error
	for name := range made {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	if other, err := othersIn(dir); err == nil && other == "" {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// othersIn names an entry of dir that berth dev did not make, or "" when
// there is none (dir missing or empty included).
func othersIn(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !made[e.Name()] {
			return e.Name(), nil
		}
	}
	return "", nil
}

// RESTConfig returns an admin client configuration for the cluster.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", c.KubeconfigPath(), err)
	}
	cfg.QPS = 200
	cfg.Burst = 400
	return cfg, nil
}

func (c *Cluster) writeKubeconfig() error {
	pk := pki{dir: filepath.Join(c.Dir, "pki")}
	read := func(p string) []byte { b, _ := os.ReadFile(p); return b }
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["berth-dev"] = &clientcmdapi.Cluster{
		Server:                   "https://" + loopback(c.Ports.APIServer),
		CertificateAuthorityData: read(pk.caCert()),
	}
	cfg.AuthInfos["berth-admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: read(pk.adminCert()),
		ClientKeyData:         read(pk.adminKey()),
	}
	cfg.Contexts["berth-dev"] = &clientcmdapi.Context{Cluster: "berth-dev", AuthInfo: "berth-admin"}
	cfg.CurrentContext = "berth-dev"
	return clientcmd.WriteToFile(*cfg, c.KubeconfigPath())
}
