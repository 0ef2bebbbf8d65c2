package controller

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTrimCachedKeepsWhatBerthReads: the cache drops managedFields,
// container statuses, what containers run and see (commands, environment,
// probes, mounts, images), volumes of secrets, config maps, tokens and the
// downward API, kubectl's last-applied copy, a pod's addresses and
// conditions but Ready and an unmet PodScheduled, and a node's images,
// addresses, versions, daemon endpoints, runtime handlers, features,
// config and volumes, and keeps what the planners, drain rules and
// controllers read.
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
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pod.Status.PodIP, pod.Status.PodIPs = "10.0.0.1", []corev1.PodIP{{IP: "10.0.0.1"}}
	pod.Status.HostIP, pod.Status.HostIPs = "10.1.0.1", []corev1.HostIP{{IP: "10.1.0.1"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "app"}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init"}}
	want := pod.DeepCopy()

	out, err := newTrimmer().trim(pod)
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
	want.Status.Conditions = []corev1.PodCondition{want.Status.Conditions[2]} // PodScheduled=True read by nothing
	want.Status.PodIP, want.Status.PodIPs, want.Status.HostIP, want.Status.HostIPs = "", nil, "", nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-want +got):\n%s", diff)
	}

	// A pod the scheduler found no node for keeps why: the provisioner
	// plans for it.
	waiting := b.Pod("w", b.Phase(corev1.PodPending))
	waiting.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available", LastTransitionTime: metav1.Unix(1, 0)}}
	want = waiting.DeepCopy()
	if out, err = newTrimmer().trim(waiting); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Status.Conditions, out.(*corev1.Pod).Status.Conditions); diff != "" || !podutil.FailedToSchedule(out.(*corev1.Pod)) {
		t.Errorf("an unschedulable pod's conditions (-want +got):\n%s", diff)
	}

	node := b.Node("n", "4", "16Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "g"))
	node.Spec.ProviderID = "kwok://n"
	node.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure,
		Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"})
	node.Status.DeclaredFeatures = []string{"InPlacePodVerticalScaling"}
	wantNode := node.DeepCopy()
	node.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "cluster.x-k8s.io/machine": "m-1"}
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/app:1"}, SizeBytes: 1 << 30}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.3.17"}}
	node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.0", OSImage: "Bottlerocket OS 1.30.0", Architecture: "amd64"}
	node.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}
	node.Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/ebs.csi.aws.com^vol-1"}
	node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/ebs.csi.aws.com^vol-1", DevicePath: "/dev/xvdba"}}
	node.Status.RuntimeHandlers = []corev1.NodeRuntimeHandler{{Name: "runc"}}
	node.Status.Features = &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
	node.Status.Config = &corev1.NodeConfigStatus{}
	wantNode.Annotations = map[string]string{"cluster.x-k8s.io/machine": "m-1"}
	out, err = newTrimmer().trim(node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantNode, out.(*corev1.Node)); diff != "" {
		t.Errorf("trimmed node (-want +got):\n%s", diff)
	}
}

// TestTrimKeepsWhatAnInPlaceResizeMakesAPodRequest: a pod resized from 3
// cpu down to 1 whose resize the kubelet has not actuated (it still runs
// with 3) counts as 3 cpu to kube-scheduler, and so to berth once trimmed;
// with the resize infeasible (an increase to 6 the node cannot hold), as
// the 2 cpu it runs with. A pod whose status matches its spec keeps no
// container status.
func TestTrimKeepsWhatAnInPlaceResizeMakesAPodRequest(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	running := func(spec, actuated string, conditions ...corev1.PodCondition) *corev1.Pod {
		p := b.Pod("p", b.NodeName("n"), b.CPU(spec))
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: "app", ImageID: "sha256:1",
			Resources: &corev1.ResourceRequirements{Requests: cpu(actuated)}, AllocatedResources: cpu(actuated)}}
		p.Status.Conditions = conditions
		return p
	}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		want       string
		wantStatus bool
	}{
		{name: "a resize down not yet actuated counts the cpu the pod still runs with", pod: running("1", "3",
			corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}), want: "3", wantStatus: true},
		{name: "an infeasible resize counts what the pod runs with, not the spec", pod: running("6", "2",
			corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}), want: "2", wantStatus: true},
		{name: "a pod running as its spec asks keeps no container status", pod: running("2", "2"), want: "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newTrimmer().trim(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Pod)
			if q := snapshot.RequestsOf(got)[corev1.ResourceCPU]; q.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Errorf("the trimmed pod requests %s cpu, want %s", q.String(), tt.want)
			}
			if kept := len(got.Status.ContainerStatuses) > 0; kept != tt.wantStatus {
				t.Errorf("container statuses kept: %v, want %v (%+v)", kept, tt.wantStatus, got.Status.ContainerStatuses)
			}
			for _, cs := range got.Status.ContainerStatuses {
				if cs.Image != "" || cs.ImageID != "" {
					t.Errorf("a kept container status keeps its image %q, %q: only the resources are read", cs.Image, cs.ImageID)
				}
			}
		})
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
	out, err := newTrimmer().trim(pod)
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
	out, err = newTrimmer().trim(node)
	if err != nil {
		t.Fatal(err)
	}
	if m := out.(*corev1.Node).Status.Allocatable[corev1.ResourceMemory]; !quantity.InRange(corev1.ResourceMemory, m) {
		t.Errorf("cached node's allocatable memory not bounded: %s", m.String())
	}

	slice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Devices: []resourcev1.Device{{Name: "gpu-0",
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: huge}}}}}}
	out, err = newTrimmer().trim(slice)
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
	out, err = newTrimmer().trim(dep)
	if err != nil {
		t.Fatal(err)
	}
	if c := out.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; !quantity.InRange(corev1.ResourceCPU, c) {
		t.Errorf("cached Deployment's template not bounded: %s", c.String())
	}

	// DaemonSet overhead reads LimitRange defaults and RuntimeClass
	// overheads for a DaemonSet without a pod.
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: huge}}}}}
	out, err = newTrimmer().trim(lr)
	if err != nil {
		t.Fatal(err)
	}
	if c := out.(*corev1.LimitRange).Spec.Limits[0].DefaultRequest[corev1.ResourceCPU]; !quantity.InRange(corev1.ResourceCPU, c) {
		t.Errorf("cached LimitRange's default request not bounded: %s", c.String())
	}
	rc := &nodev1.RuntimeClass{Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceMemory: huge}}}
	out, err = newTrimmer().trim(rc)
	if err != nil {
		t.Fatal(err)
	}
	if m := out.(*nodev1.RuntimeClass).Overhead.PodFixed[corev1.ResourceMemory]; !quantity.InRange(corev1.ResourceMemory, m) {
		t.Errorf("cached RuntimeClass's overhead not bounded: %s", m.String())
	}
}

// TestPodsOfAWorkloadShareWhatTheyHaveAlike: two pods of one ReplicaSet
// on two nodes hold one copy of their spec's parts, labels and owners,
// and each keeps its own name, node and conditions, the same as trimmed
// alone; a pod asking for other requests keeps its own spec; the tables
// never hold more than maxShared entries.
func TestPodsOfAWorkloadShareWhatTheyHaveAlike(t *testing.T) {
	pod := func(name, node, cpu string) *corev1.Pod {
		p := b.Pod(name, b.NodeName(node), b.Labels("app", "web", "pod-template-hash", "abc"), b.CPU(cpu), b.Memory("1Gi"))
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "rs", Controller: ptr.To(true)}}
		p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(int64(len(name)), 0)}}
		return p
	}
	tr := newTrimmer()
	got := sharedLikeTrimmed(t, tr, pod("web-1", "node-a", "1"), pod("web-22", "node-b", "1"), pod("other", "node-a", "2"))
	a, c, other := got[0], got[1], got[2]
	if &a.Spec.Containers[0] != &c.Spec.Containers[0] || &a.Spec.Tolerations[0] != &c.Spec.Tolerations[0] || &a.OwnerReferences[0] != &c.OwnerReferences[0] {
		t.Error("two pods of one ReplicaSet hold two copies of their containers, tolerations or owners")
	}
	a.Labels["probe"] = "x" // the same map: seen through the other pod
	if c.Labels["probe"] != "x" {
		t.Error("two pods of one ReplicaSet hold two copies of their labels")
	}
	delete(a.Labels, "probe")
	if &other.Spec.Containers[0] == &a.Spec.Containers[0] || other.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" {
		t.Errorf("a pod asking for 2 cpu shares the spec of pods asking for 1: %v", other.Spec.Containers[0].Resources.Requests)
	}
	if a.Spec.NodeName != "node-a" || c.Spec.NodeName != "node-b" || a.Name != "web-1" || c.Name != "web-22" ||
		a.Status.Conditions[0].LastTransitionTime.Equal(&c.Status.Conditions[0].LastTransitionTime) {
		t.Errorf("pods lost their own fields: %s on %s, %s on %s", a.Name, a.Spec.NodeName, c.Name, c.Spec.NodeName)
	}

	// Annotations may hold any character: a value that spells another
	// map's entries does not make the two maps one.
	packed := pod("packed", "node-a", "1")
	packed.Annotations = map[string]string{"a": "1\x00berth.dev/do-not-disrupt\x00true"}
	plain := pod("plain", "node-a", "1")
	plain.Annotations = map[string]string{"a": "1", "berth.dev/do-not-disrupt": "true"}
	for _, p := range []*corev1.Pod{packed, plain} {
		if _, err := tr.trim(p); err != nil {
			t.Fatal(err)
		}
	}
	if plain.Annotations["berth.dev/do-not-disrupt"] != "true" || len(packed.Annotations) != 1 {
		t.Errorf("annotations mixed up between pods: %v and %v", packed.Annotations, plain.Annotations)
	}

	for i := range maxShared + 10 {
		if _, err := tr.trim(pod(fmt.Sprintf("p-%d", i), "node-a", fmt.Sprintf("%dm", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(tr.parts.specs); n > maxShared {
		t.Errorf("the table of specs holds %d entries, more than %d", n, maxShared)
	}
}

// TestNodesOfATypeShareTheirCapacity: as the cache keeps them, two nodes
// of one instance type hold one copy of their capacity and of their
// allocatable, and each is the same as trimmed alone; a node whose
// allocatable differs (a kubelet that reserves more) keeps its own. Their
// label values and condition messages, decoded apart and with a garbage
// collection between them, are one string each.
func TestNodesOfATypeShareTheirCapacity(t *testing.T) {
	node := func(name, cpu string) *corev1.Node {
		// strings.Clone: each node's strings its own, as decoded.
		n := b.Node(name, "4", "16Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "g", corev1.LabelTopologyZone, strings.Clone("zone-a")))
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: strings.Clone("kubelet is posting ready status"), LastHeartbeatTime: metav1.Unix(int64(len(name)), 0)}}
		return n
	}
	tr := newTrimmer()
	a, c := sharedLikeTrimmed(t, tr, node("n-1", "3900m"))[0], node("n-22", "3900m")
	runtime.GC()
	c = sharedLikeTrimmed(t, tr, c)[0]
	other := sharedLikeTrimmed(t, tr, node("other", "3500m"))[0]
	for _, l := range []corev1.ResourceList{a.Status.Capacity, a.Status.Allocatable} {
		l["probe"] = resource.MustParse("1") // the same map: seen through the other node
	}
	_, capacity := c.Status.Capacity["probe"]
	_, allocatable := c.Status.Allocatable["probe"]
	if !capacity || !allocatable {
		t.Errorf("two nodes of one type hold two copies of their capacity (shared: %t) or allocatable (shared: %t)", capacity, allocatable)
	}
	delete(a.Status.Capacity, "probe")
	delete(a.Status.Allocatable, "probe")
	if cpu := other.Status.Allocatable.Cpu().String(); cpu != "3500m" {
		t.Errorf("a node with 3500m allocatable reads %s: it shares another node's list", cpu)
	}
	if cpu := a.Status.Allocatable.Cpu().String(); cpu != "3900m" {
		t.Errorf("a node with 3900m allocatable reads %s", cpu)
	}
	if unsafe.StringData(a.Labels[corev1.LabelTopologyZone]) != unsafe.StringData(c.Labels[corev1.LabelTopologyZone]) ||
		unsafe.StringData(a.Status.Conditions[0].Message) != unsafe.StringData(c.Status.Conditions[0].Message) {
		t.Error("two nodes hold two copies of their zone label or their Ready message")
	}
}

// sharedLikeTrimmed trims each object with tr (sharing) and checks that
// it equals the object trimmed alone; it returns the shared objects.
func sharedLikeTrimmed[T interface {
	*corev1.Pod | *corev1.Node
	DeepCopyObject() kruntime.Object
	GetName() string
}](t *testing.T, tr *trimmer, objs ...T) []T {
	t.Helper()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		want, err := (&trimmer{}).trim(o.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr.trim(o)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s shared differs from trimmed (-trimmed +shared):\n%s", o.GetName(), diff)
		}
		out = append(out, got.(T))
	}
	return out
}
