package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/config/policy"
	"github.com/berth-dev/berth/config/rbac"
	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// controllerKubeconfig is a kubeconfig that impersonates the controller's
// service account, so that the controller runs with exactly the RBAC of
// config/rbac (generated from the markers).
var controllerKubeconfig string

// installRBAC applies config/rbac and config/policy and writes
// controllerKubeconfig.
func installRBAC(ctx context.Context, c client.Client, cluster *devenv.Cluster, dir string) error {
	for _, files := range []fs.FS{rbac.Files, policy.Files} {
		if err := applyAll(ctx, files, func(ctx context.Context, o client.Object) error { return c.Create(ctx, o) }); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.LoadFromFile(cluster.KubeconfigPath())
	if err != nil {
		return err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = "system:serviceaccount:berth-system:berth-controller"
	}
	controllerKubeconfig = filepath.Join(dir, "controller.kubeconfig")
	return clientcmd.WriteToFile(*cfg, controllerKubeconfig)
}

// applyAll creates, with create, every object of every YAML file (one or
// more documents each) of files.
func applyAll(ctx context.Context, files fs.FS, create func(context.Context, client.Object) error) error {
	return fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(obj.Object) == 0 || strings.TrimSpace(obj.GetKind()) == "" {
				continue
			}
			if err := create(ctx, obj); err != nil {
				return fmt.Errorf("%s: creating %s %s: %w", path, obj.GetKind(), obj.GetName(), err)
			}
		}
	})
}

// controllerProc is a running `berth controller`.
type controllerProc struct {
	cmd     *exec.Cmd
	log     string
	metrics string
	probes  string
	done    chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// startController runs the berth binary's controller against the cluster
// as the controller's service account. It is stopped when the test ends;
// its log is printed if the test failed.
func startController(t *testing.T, args ...string) *controllerProc {
	t.Helper()
	metrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	probes := "127.0.0.1:" + strconv.Itoa(freePort(t))
	hook := "127.0.0.1:" + strconv.Itoa(freePort(t))
	logFile := filepath.Join(t.TempDir(), "controller.log")
	if dir := os.Getenv("BERTH_E2E_LOG_DIR"); dir != "" {
		// Keep the log after the test, e.g. to study a passing run.
		logFile = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".log")
	}
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(berthBin, append([]string{"controller", "--kubeconfig", controllerKubeconfig,
		"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probes,
		"--webhook-bind-address", hook, "--webhook-url", "https://" + hook}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &controllerProc{cmd: cmd, log: logFile, metrics: metrics, probes: probes, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			data, _ := os.ReadFile(logFile)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("controller log (last lines):\n%s", strings.Join(lines, "\n"))
		}
	})
	return p
}

// stop sends SIGTERM and waits for a graceful exit.
func (p *controllerProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends the controller at once, as a crash would.
func (p *controllerProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// peakRSS is the controller's peak resident memory in bytes.
func (p *controllerProc) peakRSS() int64 { return p.status("VmHWM:") }

// rss is the controller's resident memory now, in bytes.
func (p *controllerProc) rss() int64 { return p.status("VmRSS:") }

// status reads a size in kB from the process's /proc status, in bytes;
// -1 when it cannot.
func (p *controllerProc) status(field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return -1
}

// createNodeGroup creates a node group and, when the test ends, deletes it
// and its nodes.
func createNodeGroup(t *testing.T, ng *v1alpha1.NodeGroup) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNodeGroup(t, ng.Name) })
}

// removeNodeGroup deletes a test's NodeGroup and its nodes and waits until
// the group is gone. berth's controller, which would release the group's
// finalizer once its nodes are gone, has stopped by now (cleanups run in
// reverse), so the harness releases it: a later test may create a group of
// the same name.
func removeNodeGroup(t *testing.T, name string) {
	ctx := context.Background()
	_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: name})
	ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_ = env.Client.Delete(ctx, ng)
	_ = env.Client.Patch(ctx, ng, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.NodeGroup{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("node group %s still present 30 s after its test", name)
}

func groupNodes(t *testing.T, group string) []corev1.Node {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: group}); err != nil {
		t.Fatal(err)
	}
	return nodes.Items
}

// waitRunning waits until every pod of the namespace with the labels runs.
func waitRunning(t *testing.T, ns string, want int, timeout time.Duration) {
	t.Helper()
	expect.Eventually(t, timeout, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == want && len(pods.Items) == want, fmt.Sprintf("%d of %d pods running", running, len(pods.Items)), nil
	})
}

// waitUnschedulable waits until the scheduler has given up on n pods of ns.
func waitUnschedulable(t *testing.T, ns string, n int) {
	t.Helper()
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		u := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					u++
				}
			}
		}
		return u == n, fmt.Sprintf("%d of %d pods unschedulable", u, n), nil
	})
}

// events returns the messages of events about an object, as
// `kubectl describe` shows them.
func events(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := env.Clientset.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// metricFamilies reads the controller's metrics (served over plain HTTP
// in these tests).
func (p *controllerProc) metricFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + p.metrics + "/metrics") //nolint:noctx // a test's one-off read
	if err != nil {
		t.Fatalf("reading the controller's metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the controller's metrics: %v", err)
	}
	return mf
}
