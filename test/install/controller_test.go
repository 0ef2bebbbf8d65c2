package install

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-dev/berth/internal/devenv"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// impersonating writes a kubeconfig that acts as user, so that a process
// run outside the cluster has exactly that account's rights.
func impersonating(t *testing.T, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Cluster.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "impersonating.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runController builds berth and runs `berth <args>` until stop is called
// or the test ends (SIGTERM, then SIGKILL); its log is printed if the test
// failed.
func runController(t *testing.T, args []string) (stop func()) {
	t.Helper()
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "berth")).CombinedOutput(); err != nil {
		t.Fatalf("building berth: %v\n%s", err, out)
	}
	logFile := filepath.Join(dir, "controller.log")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(40 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			data, _ := os.ReadFile(logFile)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("controller log (last lines):\n%s", strings.Join(lines, "\n"))
		}
	})
	return stop
}

// localArgs are the chart's container arguments with the listen addresses
// moved to free loopback ports: the process runs on this machine, not in
// a pod. Everything else (leader election, HTTPS metrics, limits) is what
// the chart passes.
func localArgs(t *testing.T, chartArgs []string, kubeconfig string) (args []string, metricsAddr string) {
	t.Helper()
	metricsAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	webhook := "--webhook-bind-address=127.0.0.1:" + strconv.Itoa(freePort(t))
	placed := false
	for _, a := range chartArgs {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metricsAddr
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(freePort(t))
		case strings.HasPrefix(a, "--webhook-bind-address=") && a != "--webhook-bind-address=0":
			// Never the default :9443: anything else on the machine (make
			// run, another checkout's tests) may listen there.
			a, placed = webhook, true
		}
		args = append(args, a)
	}
	if !placed && !slices.Contains(args, "--webhook-bind-address=0") {
		args = append(args, webhook)
	}
	return append(args, "--kubeconfig="+kubeconfig), metricsAddr
}
