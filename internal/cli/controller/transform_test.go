package controller

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/quantity"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTrimCachedKeepsWhatBerthReads: the cache drops managedFields,
// container statuses, what containers run and see (commands, environment,
// probes, mounts, images), volumes of secrets, config maps, tokens and the
// downward API, kubectl's last-applied copy and node images, and keeps
// what the planners, drain rules and controllers read.
func TestTrimCachedKeepsWhatBerthReads(t *testing.T) {
	sidecar := corev1.ContainerRestartPolicyAlways
	requests := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	pod := b.Pod("p", b.NodeName("n"), b.Labels("app", "web"))
	pod.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"a":"whole copy"}`, "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "proxy", RestartPolicy: &sidecar, Args: []string{"--listen"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	pod.Spec.Containers = []corev1.Container{{
		Name: "app", Image: "registry/app:1", Command: []string{"/app"}, Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
		Ports:          []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
		Resources:      requests,
		ReadinessProbe: &corev1.Probe{InitialDelaySeconds: 3},
		VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}}
	keep := []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
	}
	pod.Spec.Volumes = append(slices.Clone(keep),
		corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](420)}}},
		corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "t"}}},
		corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}})
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "app"}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init"}}
	want := pod.DeepCopy()

	out, err := trimCached(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	want.ManagedFields = nil
	want.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
	want.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &sidecar, Resources: want.Spec.InitContainers[0].Resources}}
	want.Spec.Containers = []corev1.Container{{Name: "app", Ports: want.Spec.Containers[0].Ports, Resources: requests}}
	want.Spec.Volumes = keep
	want.Spec.EphemeralContainers = nil
	want.Status.ContainerStatuses, want.Status.InitContainerStatuses = nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-want +got):\n%s", diff)
	}

	node := b.Node("n", "4", "16Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "g"))
	node.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "cluster.x-k8s.io/machine": "m-1"}
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/app:1"}, SizeBytes: 1 << 30}}
	out, err = trimCached(node)
	if err != nil {
		t.Fatal(err)
	}
	n := out.(*corev1.Node)
	if n.Status.Images != nil || n.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
		t.Errorf("node kept its images or kubectl's copy: %v, %v", n.Status.Images, n.Annotations)
	}
	if n.Labels[v1alpha1.LabelNodeGroup] != "g" || n.Annotations["cluster.x-k8s.io/machine"] != "m-1" || n.Status.Allocatable.Cpu().String() != "4" || len(n.Status.Conditions) != 1 {
		t.Errorf("node lost what berth reads: %+v", n)
	}
}

// TestTrimCachedBoundsQuantitiesTheAPIServerStores: kube-apiserver stores
// a pod asking for "1e30000000" cpu; in the cache its quantities are
// bounded (comparing one with an ordinary quantity no longer writes out
// thirty million digits). What the scheduler reads from a bounded
// quantity is TestBoundKeepsWhatTheSchedulerReads's.
func TestTrimCachedBoundsQuantitiesTheAPIServerStores(t *testing.T) {
	huge := resource.MustParse("1e30000000")
	pod := b.Pod("p", b.CPU("1"))
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = huge
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: huge}
	out, err := trimCached(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	cpu := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	mem := got.Spec.Overhead[corev1.ResourceMemory]
	if !quantity.InRange(corev1.ResourceCPU, cpu) || !quantity.InRange(corev1.ResourceMemory, mem) {
		t.Fatalf("cached quantities not bounded: cpu %s, overhead %s", cpu.String(), mem.String())
	}

	node := b.Node("n", "4", "16Gi")
	node.Status.Allocatable[corev1.ResourceMemory] = huge
	out, err = trimCached(node)
	if err != nil {
		t.Fatal(err)
	}
	if m := out.(*corev1.Node).Status.Allocatable[corev1.ResourceMemory]; !quantity.InRange(corev1.ResourceMemory, m) {
		t.Errorf("cached node's allocatable memory not bounded: %s", m.String())
	}

	slice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Devices: []resourcev1.Device{{Name: "gpu-0",
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: huge}}}}}}
	out, err = trimCached(slice)
	if err != nil {
		t.Fatal(err)
	}
	if c := out.(*resourcev1.ResourceSlice).Spec.Devices[0].Capacity["memory"].Value; !quantity.InRange("", c) {
		t.Errorf("cached slice's device capacity not bounded: %s", c.String())
	}

	// A CapacityBuffer reads the requests of a workload's pod template.
	dep := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: pod.Spec}}}
	dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: huge}}}}
	out, err = trimCached(dep)
	if err != nil {
		t.Fatal(err)
	}
	if c := out.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; !quantity.InRange(corev1.ResourceCPU, c) {
		t.Errorf("cached Deployment's template not bounded: %s", c.String())
	}
}
