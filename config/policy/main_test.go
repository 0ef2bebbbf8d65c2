// The policies' tests run against the real local control plane: berth's
// RBAC and admission policies are installed as shipped, berth-system gets
// its Pod Security labels, and berth's requests are made as its service
// account (impersonated), so that what the API server refuses is what a
// cluster refuses.
package policy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/config/policy"
	"github.com/berth-dev/berth/config/rbac"
	"github.com/berth-dev/berth/config/system"
	"github.com/berth-dev/berth/internal/scheme"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// berthUser is the user name of berth's service account.
const berthUser = "system:serviceaccount:" + v1alpha1.SystemNamespace + ":berth-controller"

// The policies, by name.
const (
	podPolicy     = "berth-changes-only-its-part-of-pods"
	nodePolicy    = "berth-changes-only-its-nodes"
	createPolicy  = "berth-creates-only-kwok-nodes"
	markPolicy    = "berth-node-owner-mark"
	webhookPolicy = "berth-writes-only-its-webhook"
	systemPolicy  = "berth-runs-only-placeholders-in-its-namespace"
)

var (
	installOnce sync.Once
	installErr  error
)

// installed installs config/rbac and config/policy, gives berth-system
// the labels of config/system/namespace.yaml, waits until the API server
// enforces every policy, and returns a client acting as berth's service
// account.
func installed(t *testing.T) client.Client {
	t.Helper()
	installOnce.Do(func() { installErr = install(context.Background()) })
	if installErr != nil {
		t.Fatal(installErr)
	}
	return asBerth(t)
}

func install(ctx context.Context) error {
	for _, files := range []fs.FS{rbac.Files, policy.Files} {
		if err := createAll(ctx, files); err != nil {
			return err
		}
	}
	want, err := system.Namespace()
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), ns); err != nil {
		return err
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		ns.Labels[k] = v
	}
	if err := env.Client.Patch(ctx, ns, patch); err != nil {
		return err
	}
	return waitForPolicies(ctx)
}

// waitForPolicies waits until the API server refuses a dry run of
// something each policy forbids: a policy takes effect once the API
// server's policy cache has loaded it, a moment after it was created.
func waitForPolicies(ctx context.Context) error {
	probeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}}
	probePod := b.Pod("probe", b.Namespace(probeNS.Name), b.NoUID())
	probeNode := b.Node("policy-probe", "1", "1Gi")
	for _, o := range []client.Object{probeNS, probePod, probeNode} {
		if err := env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: berthUser}
	berth, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	relabel := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`))
	probes := map[string]func() error{
		podPolicy:  func() error { return berth.Patch(ctx, probePod.DeepCopy(), relabel, client.DryRunAll) },
		nodePolicy: func() error { return berth.Patch(ctx, probeNode.DeepCopy(), relabel, client.DryRunAll) },
		createPolicy: func() error {
			return berth.Create(ctx, b.Node("probe-created", "1", "1Gi", b.NodeAnnotation(v1alpha1.AnnotationLaunchedBy, "x")), client.DryRunAll)
		},
		markPolicy: func() error {
			return env.Client.Create(ctx, b.Node("forged", "1", "1Gi", b.NodeAnnotation(v1alpha1.AnnotationLaunchedBy, "x")), client.DryRunAll)
		},
		systemPolicy: func() error {
			// A Deployment: Pod Security refuses an unhardened pod first.
			labels := map[string]string{"app": "probe"}
			return berth.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: v1alpha1.SystemNamespace},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: probePod.Spec}}}, client.DryRunAll)
		},
		webhookPolicy: func() error {
			return berth.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, client.DryRunAll)
		},
	}
	for name, probe := range probes {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			last = probe()
			return deniedBy(last, name), nil
		})
		if err != nil {
			return fmt.Errorf("policy %s not in effect after a minute: the probe got %w", name, last)
		}
	}
	return nil
}

// createAll creates every object of every YAML file of files.
func createAll(ctx context.Context, files fs.FS) error {
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
			if len(obj.Object) == 0 {
				continue
			}
			if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: creating %s %s: %w", path, obj.GetKind(), obj.GetName(), err)
			}
		}
	})
}

// asBerth returns a client that acts as berth's service account.
func asBerth(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: berthUser}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deniedBy reports whether err is policy's refusal (not RBAC's, nor any
// other admission plugin's).
func deniedBy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func namespace(t *testing.T, name string) {
	t.Helper()
	create(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}
