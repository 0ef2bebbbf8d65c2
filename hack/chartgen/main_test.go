package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestTemplatize: berth's object names, namespace, ServiceAccount and the
// account's user name become template text; the lease name, which is the
// controller's fixed leader-election ID, stays.
func TestTemplatize(t *testing.T) {
	in := `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: berth-controller
  namespace: berth-system
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [berth-controller]
  verbs: [get]
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
  # not a real rule field: checks that strings anywhere are rewritten
  x-user: "request.userInfo.username == 'system:serviceaccount:berth-system:berth-controller' and more words to make the line long enough to wrap"
`
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(in), &obj.Object); err != nil {
		t.Fatal(err)
	}
	templatize(obj)
	data, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	got, err := substitute(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"name: " + tplName + "\n",
		"namespace: " + tplNamespace + "\n",
		"- berth-controller\n", // the lease
		"'system:serviceaccount:" + tplNamespace + ":" + tplSA + "'",
		`{{- include "berth.labels" . | nindent 4 }}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "berth-system") {
		t.Errorf("berth-system left in:\n%s", got)
	}
}

// TestTemplatizeNamespace: berth's Namespace object becomes the release
// namespace, with its own labels kept next to the chart's.
func TestTemplatizeNamespace(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": configNamespace, "labels": map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}}}}
	templatize(obj)
	data, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	got, err := substitute(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: " + tplNamespace + "\n", "pod-security.kubernetes.io/enforce: restricted\n", `include "berth.labels"`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
