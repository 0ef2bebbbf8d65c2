package devenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/berth-dev/berth/config/crd"
	"github.com/berth-dev/berth/config/system"
)

// logTailLines is how much of a component's log errors and status show.
const logTailLines = 20

// newHealthClient returns an HTTP client that presents the admin
// certificate. It does not verify serving certificates: the scheduler and
// controller-manager serve self-signed ones, and all endpoints are loopback.
func newHealthClient(pk pki) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(pk.adminCert(), pk.adminKey())
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates:       []tls.Certificate{cert},
			InsecureSkipVerify: true, //nolint:gosec // loopback health checks of self-signed components
		}},
	}, nil
}

// healthy reports whether the component's health endpoint answers 200.
func healthy(ctx context.Context, client *http.Client, p *Process) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Health, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", p.Health, resp.StatusCode, body)
	}
	return nil
}

// waitHealthy waits until the component is healthy. A component that exits
// meanwhile fails at once, with the tail of its log.
func waitHealthy(ctx context.Context, client *http.Client, p *Process, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("%s exited during start-up; last lines of %s:\n%s", p.Name, p.LogFile, tailFile(p.LogFile, logTailLines))
		}
		last = healthy(ctx, client, p)
		return last == nil, nil
	})
	if err != nil && last != nil && p.Alive() {
		return fmt.Errorf("%s not healthy after %s (%w); last lines of %s:\n%s", p.Name, timeout, last, p.LogFile, tailFile(p.LogFile, logTailLines))
	}
	return err
}

// finishSetup waits until the cluster can run pods (the controller-manager
// created the default service account) and installs berth's CRDs.
func finishSetup(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the default service account (is kube-controller-manager running?): %w", err)
	}
	if err := crd.Install(ctx, cfg); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	pcs, err := system.PriorityClasses()
	if err != nil {
		return err
	}
	for _, pc := range pcs {
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PriorityClass %s: %w", pc.Name, err)
		}
	}
	// berth's own namespace (leader election lease, placeholder pods).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", SystemNamespace, err)
	}
	return nil
}

// SystemNamespace is the namespace berth's controller uses.
const SystemNamespace = "berth-system"

// ComponentStatus is what `berth dev status` shows of one component.
type ComponentStatus struct {
	Name    string
	PID     int
	Running bool
	// Health is empty when the health endpoint answered 200, otherwise
	// what went wrong.
	Health string
	// LogTail holds the last lines of the log of a component that is not
	// running or not healthy.
	LogTail string
	LogFile string
}

// Status checks every component: process alive and health endpoint.
func (c *Cluster) Status(ctx context.Context) ([]ComponentStatus, error) {
	client, err := newHealthClient(pki{dir: filepath.Join(c.Dir, "pki")})
	if err != nil {
		return nil, err
	}
	out := make([]ComponentStatus, 0, len(c.Processes))
	for _, p := range c.Processes {
		st := ComponentStatus{Name: p.Name, PID: p.PID, Running: p.Alive(), LogFile: p.LogFile}
		if st.Running {
			if err := healthy(ctx, client, p); err != nil {
				st.Health = err.Error()
			}
		} else {
			st.Health = "not running"
		}
		if st.Health != "" {
			st.LogTail = tailFile(p.LogFile, logTailLines)
		}
		out = append(out, st)
	}
	return out, nil
}
