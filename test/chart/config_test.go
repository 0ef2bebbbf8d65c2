package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/berth-dev/berth/config/policy"
	"github.com/berth-dev/berth/config/rbac"
	"github.com/berth-dev/berth/config/system"
	"github.com/berth-dev/berth/internal/testing/helmchart"
)

// TestRBACIsConfigRBAC: with the default names the chart's ServiceAccount,
// roles and bindings are those of config/rbac (reviewed in
// config/rbac/rbac_test.go), plus only the metrics-reader ClusterRole.
func TestRBACIsConfigRBAC(t *testing.T) {
	objs := render(t)
	want := decodeFS(t, rbac.Files)
	for _, w := range want {
		got := find(t, objs, w.GetKind(), w.GetName())
		if got.GetNamespace() != w.GetNamespace() {
			t.Errorf("%s %s in namespace %q, want %q", w.GetKind(), w.GetName(), got.GetNamespace(), w.GetNamespace())
		}
		if diff := cmp.Diff(content(w), content(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s %s differs from config/rbac (-config +chart):\n%s", w.GetKind(), w.GetName(), diff)
		}
	}
	wantNames := sets.New[string]()
	for _, w := range want {
		wantNames.Insert(w.GetKind() + "/" + w.GetName())
	}
	wantNames.Insert("ClusterRole/berth-controller-metrics-reader")
	for _, o := range objs {
		if o.GetAPIVersion() == "rbac.authorization.k8s.io/v1" && !wantNames.Has(o.GetKind()+"/"+o.GetName()) {
			t.Errorf("the chart grants more than config/rbac: %s %s", o.GetKind(), o.GetName())
		}
	}
	reader := find(t, objs, "ClusterRole", "berth-controller-metrics-reader")
	if diff := cmp.Diff(map[string]any{"rules": []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}}, content(reader)); diff != "" {
		t.Errorf("the metrics reader grants more than get /metrics:\n%s", diff)
	}
}

// TestPoliciesPriorityClassesAndCRDsAreConfigs: the admission policies,
// PriorityClasses and CRDs the chart installs are those of config/.
func TestPoliciesPriorityClassesAndCRDsAreConfigs(t *testing.T) {
	objs := render(t)
	root := repoRoot(t)
	want := decodeFS(t, policy.Files)
	want = append(want, decodeFS(t, os.DirFS(filepath.Join(root, "config", "system")), "priorityclasses.yaml")...)
	want = append(want, decodeFS(t, os.DirFS(filepath.Join(root, "config", "crd", "bases")))...)
	if len(want) < 10 {
		t.Fatalf("read only %d objects from config/", len(want))
	}
	for _, w := range want {
		got := find(t, objs, w.GetKind(), w.GetName())
		if diff := cmp.Diff(content(w), content(got)); diff != "" {
			t.Errorf("%s %s differs from config/ (-config +chart):\n%s", w.GetKind(), w.GetName(), diff)
		}
	}
}

// TestNamespaceIsConfigNamespace: the chart renders the release namespace
// with the labels and annotations of config/system/namespace.yaml (Pod
// Security restricted, kept on uninstall), unless told not to.
func TestNamespaceIsConfigNamespace(t *testing.T) {
	want, err := system.Namespace()
	if err != nil {
		t.Fatal(err)
	}
	got := find(t, render(t), "Namespace", want.Name)
	for k, v := range want.Labels {
		if got.GetLabels()[k] != v {
			t.Errorf("namespace label %s=%q, want %q", k, got.GetLabels()[k], v)
		}
	}
	if diff := cmp.Diff(want.Annotations, got.GetAnnotations()); diff != "" {
		t.Errorf("namespace annotations differ from config/system (-config +chart):\n%s", diff)
	}
	if want.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("config/system/namespace.yaml enforces %q, want restricted", want.Labels["pod-security.kubernetes.io/enforce"])
	}
	if slices.ContainsFunc(render(t, "--set", "namespace.create=false"), func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" }) {
		t.Error("namespace.create=false renders a Namespace")
	}
}

// content is an object without apiVersion, kind and metadata.
func content(o *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range o.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// decodeFS decodes the YAML files of fsys (only the named ones, if any).
func decodeFS(t *testing.T, fsys fs.FS, only ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || (len(only) > 0 && !slices.Contains(only, path)) {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
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
			if len(obj.Object) > 0 {
				out = append(out, obj)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLogValuesTheControllerCannotTakeAreRefused: a log level of 0 is one
// controller-runtime refuses at flag parsing (the pods would exit), so
// the schema refuses it; with development logging on, the chart leaves
// out the encoder, level and stack-trace flags that would override it
// (with them, development logging stayed JSON at info).
func TestLogValuesTheControllerCannotTakeAreRefused(t *testing.T) {
	for _, v := range []string{"controller.log.level=0", "controller.log.level=00"} {
		if _, err := helmchart.Render(context.Background(), repoRoot(t), "--set", v); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("--set %s: %v, want the schema's refusal", v, err)
		}
	}
	d := deployment(t, render(t, "--set", "controller.log.development=true"))
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--zap-devel=true") {
		t.Errorf("args %q, want --zap-devel=true", args)
	}
	for _, a := range args {
		for _, flag := range []string{"--zap-encoder", "--zap-log-level", "--zap-stacktrace-level"} {
			if strings.HasPrefix(a, flag+"=") {
				t.Errorf("development logging with %s, which overrides development's own", a)
			}
		}
	}
}
