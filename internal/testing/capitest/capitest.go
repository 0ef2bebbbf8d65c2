// Package capitest installs Cluster API core's CRDs (from its Go module)
// into a test's control plane, for tests of what berth reads of Cluster
// API objects without running Cluster API's controllers.
package capitest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/devenv"
	"github.com/berth-dev/berth/internal/testing/expect"
)

var (
	mu        sync.Mutex
	installed = map[client.Client]bool{}
)

// InstallCRDs installs the Machine, MachineDeployment and MachineSet CRDs
// through c, once per client, and waits until they are served.
func InstallCRDs(t *testing.T, c client.Client) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if installed[c] {
		return
	}
	ctx := context.Background()
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	capi, err := devenv.LocateClusterAPI(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cluster.x-k8s.io_machines.yaml", "cluster.x-k8s.io_machinedeployments.yaml", "cluster.x-k8s.io_machinesets.yaml"} {
		data, err := os.ReadFile(filepath.Join(capi.CRDs, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, kind := range []string{"MachineList", "MachineDeploymentList", "MachineSetList"} {
			if err := c.List(ctx, List(kind)); err != nil {
				return false, kind + " not served yet: " + err.Error(), nil
			}
		}
		return true, "", nil
	})
	installed[c] = true
}

// List is an empty list of Cluster API's kind (MachineList, ...) of
// cluster.x-k8s.io/v1beta2.
func List(kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	l.SetKind(kind)
	return l
}

// Object is a Cluster API object of kind in namespace, with spec.
func Object(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// MachineDeployment is a MachineDeployment of the cluster "c" with
// replicas and annotations, whose Machines carry the labels Cluster API
// gives them.
func MachineDeployment(namespace, name string, replicas int64, annotations map[string]string) *unstructured.Unstructured {
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/deployment-name": name}
	d := Object("MachineDeployment", namespace, name, map[string]any{
		"clusterName": "c", "replicas": replicas, "selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
			"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "x"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "T", "name": "t"},
		}},
	})
	d.SetAnnotations(annotations)
	return d
}

// Machine is a Machine of the MachineDeployment md (of the cluster "c",
// labelled as Cluster API labels it), without a provider ID or a Node: a
// machine still booting.
func Machine(namespace, md, name string) *unstructured.Unstructured {
	m := Object("Machine", namespace, name, map[string]any{"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "x"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "M", "name": name}})
	m.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c", "cluster.x-k8s.io/deployment-name": md})
	return m
}
