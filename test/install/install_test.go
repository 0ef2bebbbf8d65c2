package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/config/system"
	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/helmchart"
)

const (
	release = "berth"
	ns      = helmchart.Namespace
	// prometheus is the ServiceAccount the test binds to the chart's
	// metrics reader, as a user binds their Prometheus.
	prometheus = "prometheus"
)

// TestInstallRunUninstall: `helm install --create-namespace` of the chart
// is accepted whole by the API server and gives berth-system the
// restricted Pod Security profile, which the controller's pods meet;
// berth, run with the chart's arguments as the chart's ServiceAccount,
// elects itself leader, launches a node for a pending pod and serves
// metrics to the reader the chart binds; the chart's replicas are placed
// apart and off berth's nodes; `helm upgrade` rolls a changed value; `helm
// uninstall` removes every object of the chart and keeps the CRDs and the
// namespace.
func TestInstallRunUninstall(t *testing.T) {
	ctx := context.Background()
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.Cluster.KubeconfigPath()
	cl = newClient(t)
	removePreinstalled(t, root)

	start := time.Now()
	if _, err := helmchart.Helm(ctx, root, "install", release, helmchart.Chart, "--namespace", ns, "--create-namespace",
		"--kubeconfig", kubeconfig, "--timeout", "2m", "--set", "criticalPodsQuota.create=true",
		"--set-json", fmt.Sprintf(`metrics.reader.subjects=[{"kind":"ServiceAccount","name":%q,"namespace":%q}]`, prometheus, ns)); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install took %s", time.Since(start).Round(time.Millisecond))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: prometheus, Namespace: ns}}
	if err := cl.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	manifest, err := helmchart.Helm(ctx, root, "get", "manifest", release, "--namespace", ns, "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := helmchart.Decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	crds := chartCRDs(t, root)
	checkInstalled(t, objs, crds)

	d := deploymentOf(t, objs)
	user := "system:serviceaccount:" + ns + ":" + d.Spec.Template.Spec.ServiceAccountName
	args, metricsAddr := localArgs(t, d.Spec.Template.Spec.Containers[0].Args, impersonating(t, user))
	stop := runController(t, args)
	provisionAPod(t)
	keepPlaceholders(t)
	checkControllerPodsPlaced(t, d)
	checkLeader(t)
	checkMetrics(t, metricsAddr)
	stop()
	cleanupWorkload(t)
	upgrade(t, root, kubeconfig)

	start = time.Now()
	if _, err := helmchart.Helm(ctx, root, "uninstall", release, "--namespace", ns, "--kubeconfig", kubeconfig, "--timeout", "2m"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm uninstall took %s", time.Since(start).Round(time.Millisecond))
	checkUninstalled(t, objs, crds, d)
}

// upgrade: `helm upgrade` with a changed value rolls the Deployment's
// arguments (no immutable field, such as the selector, changes).
func upgrade(t *testing.T, root, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	if _, err := helmchart.Helm(ctx, root, "upgrade", release, helmchart.Chart, "--namespace", ns, "--kubeconfig", kubeconfig,
		"--timeout", "2m", "--reuse-values", "--set", "controller.scaleDownInterval=20s"); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "berth-controller"}, d); err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--scale-down-interval=20s") {
		t.Errorf("after helm upgrade the Deployment runs %q, want --scale-down-interval=20s", args)
	}
}

// cl is the admin's client, with the CRD types added to berth's scheme.
var cl client.Client

func newClient(t *testing.T) client.Client {
	t.Helper()
	s := scheme.New()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	// No client-side rate limit: the test polls a local API server, and a
	// limiter that refuses to wait past a poll's deadline would replace the
	// reason a poll failed with its own error.
	cfg.QPS, cfg.RateLimiter = -1, nil
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// removePreinstalled deletes what `berth dev up` installs and the chart
// owns (CRDs, PriorityClasses, the namespace berth-system), so that the
// chart installs them itself.
func removePreinstalled(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	pcs, err := system.PriorityClasses()
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for _, pc := range pcs {
		objs = append(objs, pc)
	}
	for _, crd := range chartCRDs(t, root) {
		objs = append(objs, crd)
	}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, o := range objs {
		if err := cl.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	var left []string
	// The API server's CRD finalizer works through the CRDs one at a time;
	// on a loaded machine (make test runs packages in parallel) one CRD
	// was seen still terminating after 2 minutes.
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 6*time.Minute, true, func(ctx context.Context) (bool, error) {
		var now []string
		for _, o := range objs {
			switch err := cl.Get(ctx, client.ObjectKeyFromObject(o), o); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, nil // e.g. the deadline: keep the last full round's answer
			default:
				now = append(now, fmt.Sprintf("%T %s (deletion %v, finalizers %v)", o, o.GetName(), o.GetDeletionTimestamp(), o.GetFinalizers()))
			}
		}
		left = now
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("deleting what berth dev up installed: still there: %v", left)
	}
}

// chartCRDs are the CRDs of charts/berth/crds.
func chartCRDs(t *testing.T, root string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, helmchart.Chart, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in the chart: %v", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := helmchart.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
				t.Fatal(err)
			}
			out = append(out, crd)
		}
	}
	return out
}

func deploymentOf(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatal("the release has no Deployment")
	return nil
}

// checkInstalled: every object of the release exists, the CRDs are
// established, and the API server admitted the Deployment's pods (their
// priority class, security context and affinity).
func checkInstalled(t *testing.T, objs []*unstructured.Unstructured, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	kinds := map[string]int{}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s %s of the release: %v", o.GetKind(), o.GetName(), err)
		}
		kinds[o.GetKind()]++
	}
	t.Logf("installed %d objects: %v", len(objs), kinds)
	for _, want := range []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"Service", "PodDisruptionBudget", "PriorityClass", "ResourceQuota", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Namespace"} {
		if kinds[want] == 0 {
			t.Errorf("the release has no %s", want)
		}
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, fmt.Sprintf("CRD %s: %v", crd.Name, err), nil
			}
			if !established(got) {
				return false, "CRD " + crd.Name + " not established", nil
			}
		}
		return true, "", nil
	})
	namespace := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	if level := namespace.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
		t.Errorf("namespace %s enforces Pod Security %q, want restricted (labels %v)", ns, level, namespace.Labels)
	}
	d := deploymentOf(t, objs)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if p.Spec.PriorityClassName != "system-cluster-critical" || p.Spec.Priority == nil {
				return false, fmt.Sprintf("pod %s has priority class %q", p.Name, p.Spec.PriorityClassName), nil
			}
		}
		return len(pods.Items) == 2, fmt.Sprintf("%d of 2 controller pods created (events: %v)", len(pods.Items), replicaSetEvents(ctx)), nil
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// replicaSetEvents explains why pods were not created (e.g. forbidden by
// admission).
func replicaSetEvents(ctx context.Context) []string {
	list, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=ReplicaSet"})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// checkUninstalled: every object of the release but its namespace is
// gone, and with the Deployment its pods; the CRDs and the namespace stay,
// as Helm keeps them.
func checkUninstalled(t *testing.T, objs []*unstructured.Unstructured, crds []*apiextensionsv1.CustomResourceDefinition, d *appsv1.Deployment) {
	t.Helper()
	// Each round reads every object of the release: poll once a second.
	var left []string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var now []string
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				continue // helm.sh/resource-policy: keep
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			switch err := cl.Get(ctx, client.ObjectKeyFromObject(o), got); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, nil // e.g. the deadline: keep the last full round's answer
			default:
				now = append(now, o.GetKind()+" "+o.GetName())
			}
		}
		for _, l := range []client.ObjectList{&appsv1.ReplicaSetList{}, &corev1.PodList{}} {
			if err := cl.List(ctx, l, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
				return false, nil
			}
			if n := apimeta.LenList(l); n > 0 {
				now = append(now, fmt.Sprintf("%d %T items", n, l))
			}
		}
		left = now
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("left after uninstall: %v", left)
	}
	for _, crd := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(crd), got); err != nil {
			t.Errorf("CRD %s after uninstall: %v (Helm keeps CRDs)", crd.Name, err)
		}
	}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
		t.Errorf("namespace %s after uninstall: %v (the chart keeps it)", ns, err)
	}
}
