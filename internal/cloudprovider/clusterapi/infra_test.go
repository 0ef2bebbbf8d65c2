package clusterapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/testing/expect"
)

const (
	infraGroup   = "infrastructure.cluster.x-k8s.io"
	infraVersion = "v1beta1"
	infraKind    = "CapacityMachineTemplate"
)

var infraCRDOnce bool

// installInfraCRD installs an infrastructure machine template kind, as an
// infrastructure provider's CRD that takes part in Cluster API's
// autoscaling-from-zero contract (status.capacity, status.nodeInfo).
func installInfraCRD(t *testing.T) {
	t.Helper()
	if infraCRDOnce {
		return
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "capacitymachinetemplates." + infraGroup},
		"spec": map[string]any{
			"group": infraGroup, "scope": "Namespaced",
			"names": map[string]any{"kind": infraKind, "listKind": infraKind + "List", "plural": "capacitymachinetemplates", "singular": "capacitymachinetemplate"},
			"versions": []any{map[string]any{
				"name": infraVersion, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if err := env.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(infraGroup + "/" + infraVersion)
		l.SetKind(infraKind + "List")
		err := env.Client.List(ctx, l)
		return err == nil, "infrastructure template kind not served yet", nil
	})
	infraCRDOnce = true
}

// infraTemplate creates a template reporting status.
func infraTemplate(t *testing.T, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}}
	u.SetAPIVersion(infraGroup + "/" + infraVersion)
	u.SetKind(infraKind)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	u.Object["status"] = status
	if err := env.Client.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
}

// pointAt makes the fixture's MachineDeployment's machines of the
// infrastructure template name (v1beta2: apiGroup and kind).
func (f *fixture) pointAt(t *testing.T, name string) {
	t.Helper()
	md := capiObj("MachineDeployment", f.md, nil)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	ref := map[string]any{"apiGroup": infraGroup, "kind": infraKind, "name": name}
	if err := unstructured.SetNestedMap(md.Object, ref, "spec", "template", "spec", "infrastructureRef"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(context.Background(), md); err != nil {
		t.Fatal(err)
	}
}

// TestRefreshReadsTheInfrastructureTemplatesStatus (Cluster API's opt-in
// autoscaling from zero, as Cluster Autoscaler reads it,
// clusterapi_unstructured.go InstanceCapacity): a MachineDeployment is
// planned with what its infrastructure template reports (status.capacity,
// status.nodeInfo), each capacity annotation winning for its resource and
// a labels annotation for the architecture; a template that does not
// exist leaves the NodeGroup's spec, and an entry of the status that
// cannot be read is left out, the rest read.
func TestRefreshReadsTheInfrastructureTemplatesStatus(t *testing.T) {
	installInfraCRD(t)
	infraTemplate(t, "arm-8", map[string]any{
		"capacity": map[string]any{"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "58"},
		"nodeInfo": map[string]any{"architecture": "arm64", "operatingSystem": "linux"},
	})
	infraTemplate(t, "garbled", map[string]any{"capacity": map[string]any{"cpu": "lots", "nvidia.com/gpu": "2"}})
	for i, tc := range []struct {
		name        string
		annotations map[string]string
		template    string
		cpu, gpu    string // "" : none
		arch        string
	}{
		{name: "the template's status", template: "arm-8", cpu: "8", gpu: "1", arch: "arm64"},
		{name: "capacity annotations win for their resources", template: "arm-8", annotations: map[string]string{clusterapi.AnnotationCPU: "16", clusterapi.AnnotationMemory: "64Gi"},
			cpu: "16", gpu: "1", arch: "arm64"},
		{name: "a GPU annotation alone keeps the template's cpu", template: "arm-8", annotations: map[string]string{clusterapi.AnnotationGPUCount: "2"},
			cpu: "8", gpu: "2", arch: "arm64"},
		{name: "a labels annotation wins for the architecture", template: "arm-8", annotations: map[string]string{clusterapi.AnnotationLabels: "kubernetes.io/arch=amd64"},
			cpu: "8", gpu: "1", arch: "amd64"},
		{name: "a template that does not exist leaves the spec", template: "missing", cpu: "2", arch: "amd64"},
		{name: "an entry that cannot be read is left out", template: "garbled", cpu: "2", gpu: "2", arch: "amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fmt.Sprintf("infra-%d", i), 0, tc.annotations)
			f.pointAt(t, tc.template)
			ng := f.ng.DeepCopy()
			failed := cloudprovider.Refresh(context.Background(), f.provider, []*v1alpha1.NodeGroup{ng})
			if failed != nil {
				t.Fatal(failed)
			}
			it := ng.Spec.InstanceTypes[0]
			cpu, gpu := it.Capacity[corev1.ResourceCPU], it.Capacity["nvidia.com/gpu"]
			gotGPU := ""
			if !gpu.IsZero() {
				gotGPU = gpu.String()
			}
			arch := it.Architecture
			if arch == "" {
				arch = "amd64"
			}
			if cpu.String() != tc.cpu || gotGPU != tc.gpu || arch != tc.arch {
				t.Errorf("planned with cpu %s, gpu %q, architecture %s; want %s, %q, %s", cpu.String(), gotGPU, arch, tc.cpu, tc.gpu, tc.arch)
			}
		})
	}
}

// TestATemplateBerthMayNotReadLeavesTheAnnotations: berth's role may not
// read an infrastructure provider's group (one outside
// infrastructure.cluster.x-k8s.io). The group is planned with its spec's
// capacity, and the annotated bounds still apply: the refresh does not
// fail as a whole (it would drop the annotated maxSize too).
func TestATemplateBerthMayNotReadLeavesTheAnnotations(t *testing.T) {
	installInfraCRD(t)
	infraTemplate(t, "forbidden-8", map[string]any{"capacity": map[string]any{"cpu": "8", "memory": "32Gi"}})
	f := newFixture(t, "infra-forbidden", 0, map[string]string{clusterapi.AnnotationMaxSize: "3"})
	f.pointAt(t, "forbidden-8")
	denying := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == infraKind {
				return apierrors.NewForbidden(schema.GroupResource{Group: infraGroup, Resource: "capacitymachinetemplates"}, key.Name, errors.New("berth may not read it"))
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	f.provider = clusterapi.New(env.Client, denying, f.clock)
	ng := f.ng.DeepCopy()
	if failed := cloudprovider.Refresh(context.Background(), f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
		t.Fatalf("refresh failed: %v; want the annotations applied without the template", failed)
	}
	cpu := ng.Spec.InstanceTypes[0].Capacity[corev1.ResourceCPU]
	if ng.Spec.MaxSize != 3 || cpu.String() != "2" {
		t.Errorf("maxSize %d cpu %s, want the annotated 3 and the spec's 2", ng.Spec.MaxSize, cpu.String())
	}
}

// TestInfraTemplateStatusReadsWhatParses: numbers are quantities too
// (JSON has no quantity type), an entry that is neither, or negative, is
// named in the error and left out, and a status of the wrong shape
// reads as nothing rather than crashing.
func TestInfraTemplateStatusReadsWhatParses(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"capacity": map[string]any{"cpu": int64(4), "memory": "8Gi", "pods": float64(110), "example.com/bad": true, "example.com/neg": "-1"},
		"nodeInfo": map[string]any{"architecture": "arm64"},
	}}}
	tmpl, err := clusterapi.InfraTemplateStatus(u)
	if err == nil || !strings.Contains(err.Error(), "status.capacity.example.com/bad=true") || !strings.Contains(err.Error(), "status.capacity.example.com/neg=-1") {
		t.Errorf("error %v, want both bad entries named", err)
	}
	cpu, mem, pods := tmpl.Capacity[corev1.ResourceCPU], tmpl.Capacity[corev1.ResourceMemory], tmpl.Capacity[corev1.ResourcePods]
	if len(tmpl.Capacity) != 3 || cpu.String() != "4" || mem.String() != "8Gi" || pods.String() != "110" || tmpl.Labels["kubernetes.io/arch"] != "arm64" {
		t.Errorf("read %v %v, want cpu 4, memory 8Gi, pods 110 and arm64", tmpl.Capacity, tmpl.Labels)
	}
	for _, status := range []any{"running", map[string]any{"capacity": "lots", "nodeInfo": []any{"x"}}, nil} {
		u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
		if tmpl, _ := clusterapi.InfraTemplateStatus(u); len(tmpl.Capacity)+len(tmpl.Labels) != 0 {
			t.Errorf("status %v read as %+v, want nothing", status, tmpl)
		}
	}
}

// TestATemplateIsReadAgainAfterItsTTL: what a template says is kept for
// InfraTemplateTTL (a round reads no template from the management cluster
// again), and read again after it: a status its provider writes late is
// seen.
func TestATemplateIsReadAgainAfterItsTTL(t *testing.T) {
	installInfraCRD(t)
	infraTemplate(t, "late-4", map[string]any{"capacity": map[string]any{"cpu": "4"}})
	f := newFixture(t, "infra-ttl", 0, nil)
	f.pointAt(t, "late-4")
	cpu := func() string {
		t.Helper()
		ng := f.ng.DeepCopy()
		if failed := cloudprovider.Refresh(context.Background(), f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
			t.Fatal(failed)
		}
		q := ng.Spec.InstanceTypes[0].Capacity[corev1.ResourceCPU]
		return q.String()
	}
	if got := cpu(); got != "4" {
		t.Fatalf("cpu %s, want the template's 4", got)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(infraGroup + "/" + infraVersion)
	u.SetKind(infraKind)
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "late-4"}, u); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"capacity": map[string]any{"cpu": "6"}}
	if err := env.Client.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if got := cpu(); got != "4" {
		t.Errorf("within the TTL: cpu %s, want the 4 read before", got)
	}
	f.clock.Step(clusterapi.InfraTemplateTTL)
	if got := cpu(); got != "6" {
		t.Errorf("past the TTL: cpu %s, want the status written since, 6", got)
	}
}

// TestATransientTemplateReadFailureIsNotKept (a review): a read of the
// template that fails for a moment (the API server timed out) is tried
// again the next round, not kept for InfraTemplateTTL.
func TestATransientTemplateReadFailureIsNotKept(t *testing.T) {
	installInfraCRD(t)
	infraTemplate(t, "flaky-8", map[string]any{"capacity": map[string]any{"cpu": "8"}})
	f := newFixture(t, "infra-flaky", 0, nil)
	f.pointAt(t, "flaky-8")
	failed := false
	flaky := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == infraKind && !failed {
				failed = true
				return apierrors.NewServerTimeout(schema.GroupResource{Group: infraGroup, Resource: "capacitymachinetemplates"}, "get", 1)
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	f.provider = clusterapi.New(env.Client, flaky, f.clock)
	for round, want := range []string{"2", "8"} { // the spec's, then the template's
		ng := f.ng.DeepCopy()
		if failed := cloudprovider.Refresh(context.Background(), f.provider, []*v1alpha1.NodeGroup{ng}); failed != nil {
			t.Fatal(failed)
		}
		if q := ng.Spec.InstanceTypes[0].Capacity[corev1.ResourceCPU]; q.String() != want {
			t.Errorf("round %d: cpu %s, want %s", round, q.String(), want)
		}
	}
}

// TestCreateHonoursTheAnnotatedMachineTimeout (a review): a group whose
// object says maxnodeprovisiontime=1h: a Machine 11 minutes without
// infrastructure is still within it, whoever calls Create (the standby
// controller passes the stored, unrefreshed group).
func TestCreateHonoursTheAnnotatedMachineTimeout(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "rev-timeout", 1, map[string]string{clusterapi.AnnotationMaxNodeProvisionTime: "1h"})
	addMachine(t, f.ng, "rev-timeout", "rev-timeout-a", false)
	f.clock.Step(11 * time.Minute)
	off := cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}
	_, err := f.provider.Create(ctx, cloudprovider.CreateRequest{NodeGroup: f.ng, Offering: off})
	if cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("Create = %v: removed a Machine the annotated 1h machine timeout still allows", err)
	}
}
