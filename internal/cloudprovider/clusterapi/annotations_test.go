package clusterapi

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/builders"
)

func TestParseAnnotations(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    Template
		wantErr string
	}{
		{
			name: "an object without annotations says nothing",
			in:   nil,
			want: Template{Capacity: corev1.ResourceList{}},
		},
		{
			name: "Cluster Autoscaler's scale-from-zero annotations become capacity, labels and taints",
			in: map[string]string{
				AnnotationMinSize: "1", AnnotationMaxSize: "5",
				AnnotationCPU: "4", AnnotationMemory: "16Gi", AnnotationEphemeralDisk: "100Gi", AnnotationMaxPods: "58",
				AnnotationGPUType: "nvidia.com/gpu", AnnotationGPUCount: "2",
				AnnotationLabels: "team=ml, disk=ssd",
				AnnotationTaints: "gpu=true:NoSchedule,dedicated:NoExecute",
			},
			want: Template{
				MinSize: ptr.To[int32](1), MaxSize: ptr.To[int32](5),
				Capacity: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
					corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"), corev1.ResourcePods: resource.MustParse("58"),
					"nvidia.com/gpu": resource.MustParse("2"),
				},
				Labels: map[string]string{"team": "ml", "disk": "ssd"},
				Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}},
			},
		},
		{
			name: "a GPU count without a type counts nvidia.com/gpu",
			in:   map[string]string{AnnotationGPUCount: "1"},
			want: Template{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		},
		{
			// apimachinery's parser does not return on the first.
			name:    "a capacity with a ten-digit exponent is an error naming the annotation and value",
			in:      map[string]string{AnnotationCPU: "1e2147483648", AnnotationMemory: "1e30000000"},
			wantErr: AnnotationCPU + `="1e2147483648" is not a non-negative quantity`,
		},
		{
			// Zero with that exponent: reading its millicores took 1.4 s
			// on every plan.
			name:    "a capacity with no digits before a long exponent is an error",
			in:      map[string]string{AnnotationMemory: "e999999999"},
			wantErr: AnnotationMemory + `="e999999999" is not a non-negative quantity`,
		},
		{
			name:    "a min size above the max size is an error naming both",
			in:      map[string]string{AnnotationMinSize: "6", AnnotationMaxSize: "5"},
			wantErr: AnnotationMinSize + " (6) is larger than " + AnnotationMaxSize + " (5)",
		},
		{
			name:    "a negative max size is an error naming the annotation and value",
			in:      map[string]string{AnnotationMaxSize: "-1"},
			wantErr: AnnotationMaxSize + `="-1" is not a non-negative integer`,
		},
		{
			name:    "a max size beyond int32 is an error, not an overflow",
			in:      map[string]string{AnnotationMaxSize: "4294967297"},
			wantErr: AnnotationMaxSize + `="4294967297" is not a non-negative integer`,
		},
		{
			name:    "a cpu that is not a quantity is an error",
			in:      map[string]string{AnnotationCPU: "four"},
			wantErr: AnnotationCPU + `="four" is not a non-negative quantity`,
		},
		{
			name:    "a taint with an unknown effect is an error",
			in:      map[string]string{AnnotationTaints: "gpu=true:Sometimes"},
			wantErr: AnnotationTaints + `: "gpu=true:Sometimes" is not key[=value]:Effect`,
		},
		{
			// Cluster Autoscaler's InstanceCapacity drops a zero, and
			// reads maxPods 0 as its default; Labels and Taints skip
			// empty entries.
			name: "a zero capacity is not given, an empty list entry is skipped",
			in: map[string]string{AnnotationCPU: "0", AnnotationMemory: "16Gi", AnnotationMaxPods: "0", AnnotationGPUCount: "0",
				AnnotationLabels: "team=ml,,", AnnotationTaints: "gpu=true:NoSchedule, "},
			want: Template{Capacity: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}, Labels: map[string]string{"team": "ml"},
				Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		},
		{
			// Cluster Autoscaler's getDurationOption: lower case, empty
			// not given, one that does not parse logged and ignored.
			name: "autoscaling options are read as Cluster Autoscaler reads them",
			in:   map[string]string{AnnotationScaleDownUnneededTime: "1H30M", AnnotationMaxNodeProvisionTime: ""},
			want: Template{Capacity: corev1.ResourceList{}, ConsolidateAfter: ptr.To(90 * time.Minute)},
		},
		{
			name: "an autoscaling option that is not a duration is left out, said",
			in:   map[string]string{AnnotationScaleDownUnneededTime: "an hour", AnnotationMaxSize: "3"},
			want: Template{Capacity: corev1.ResourceList{}, MaxSize: ptr.To[int32](3),
				Ignored: []string{AnnotationScaleDownUnneededTime + `="an hour" is not a duration such as 10m or 1h30m`}},
		},
		{
			name:    "a label without a value separator is an error",
			in:      map[string]string{AnnotationLabels: "team"},
			wantErr: AnnotationLabels + `: "team" is not key=value`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAnnotations(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("template (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplateApply(t *testing.T) {
	tests := []struct {
		name string
		ng   *v1alpha1.NodeGroup
		in   map[string]string
		want func(ng *v1alpha1.NodeGroup)
	}{
		{
			name: "annotated bounds narrow the group's, never widen them",
			ng:   builders.NodeGroup("g", builders.Size(1, 4)),
			in:   map[string]string{AnnotationMinSize: "0", AnnotationMaxSize: "3"},
			want: func(ng *v1alpha1.NodeGroup) { ng.Spec.MinSize, ng.Spec.MaxSize = 1, 3 },
		},
		{
			name: "a larger annotated max does not raise the group's max",
			ng:   builders.NodeGroup("g", builders.Size(0, 4)),
			in:   map[string]string{AnnotationMaxSize: "100", AnnotationMinSize: "2"},
			want: func(ng *v1alpha1.NodeGroup) { ng.Spec.MinSize = 2 },
		},
		{
			name: "annotated capacity, labels and taints describe the machines to scale from zero",
			ng:   builders.NodeGroup("g"),
			in: map[string]string{AnnotationCPU: "8", AnnotationMemory: "32Gi",
				AnnotationLabels: "team=ml,berth.dev/nodegroup=other", AnnotationTaints: "gpu=true:NoSchedule"},
			want: func(ng *v1alpha1.NodeGroup) {
				ng.Spec.InstanceTypes[0].Capacity[corev1.ResourceCPU] = resource.MustParse("8")
				ng.Spec.InstanceTypes[0].Capacity[corev1.ResourceMemory] = resource.MustParse("32Gi")
				ng.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"team": "ml"}
				ng.Spec.Template.Taints = []v1alpha1.NodeTaint{{Key: "gpu", Value: "true", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
			},
		},
		{
			// Cluster Autoscaler's per-group autoscaling options
			// (GetOptions) that berth has: where the NodeGroup says
			// nothing.
			name: "the autoscaling options give consolidateAfter and machineTimeout",
			ng:   capiGroup(nil, nil),
			in:   map[string]string{AnnotationScaleDownUnneededTime: "1h", AnnotationMaxNodeProvisionTime: "20m"},
			want: func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: time.Hour}
				ng.Spec.Provider.ClusterAPI.MachineTimeout = &metav1.Duration{Duration: 20 * time.Minute}
			},
		},
		{
			name: "the NodeGroup's own consolidateAfter and machineTimeout win",
			ng:   capiGroup(&metav1.Duration{Duration: 5 * time.Minute}, &metav1.Duration{Duration: 3 * time.Minute}),
			in:   map[string]string{AnnotationScaleDownUnneededTime: "1h", AnnotationMaxNodeProvisionTime: "20m"},
			want: func(*v1alpha1.NodeGroup) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseAnnotations(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.ng.DeepCopy()
			tt.want(want)
			tmpl.Apply(tt.ng)
			if diff := cmp.Diff(want.Spec, tt.ng.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnnotatedOSAndArchitectureLabelTheNodes: the labels annotation of
// a MachineDeployment of Windows arm64 machines makes the group's nodes
// (planned from zero and launched) carry windows and arm64, under the
// well-known names and the beta ones beside them, whatever beta labels
// the annotation gives.
func TestAnnotatedOSAndArchitectureLabelTheNodes(t *testing.T) {
	tmpl, err := ParseAnnotations(map[string]string{AnnotationCPU: "4", AnnotationMemory: "16Gi",
		AnnotationLabels: "kubernetes.io/os=windows,kubernetes.io/arch=arm64,beta.kubernetes.io/os=linux,beta.kubernetes.io/arch=amd64"})
	if err != nil {
		t.Fatal(err)
	}
	ng := builders.NodeGroup("g")
	tmpl.Apply(ng)
	it := &ng.Spec.InstanceTypes[0]
	l := ng.NodeLabels(it, &it.Offerings[0])
	got := map[string]string{}
	for _, k := range []string{v1alpha1.LabelOS, v1alpha1.LabelOSBeta, v1alpha1.LabelArch, v1alpha1.LabelArchBeta} {
		got[k] = l[k]
	}
	want := map[string]string{v1alpha1.LabelOS: "windows", v1alpha1.LabelOSBeta: "windows", v1alpha1.LabelArch: "arm64", v1alpha1.LabelArchBeta: "arm64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node labels (-want +got):\n%s", diff)
	}
}

// TestAnnotatedStartupAndStatusTaintsAreNotTheTemplates: of the taints
// the capacity.cluster-autoscaler.kubernetes.io/taints annotation lists,
// Cluster Autoscaler leaves out of the template node
// (taints.SanitizeTaints) the startup taints (the startup-taint. and
// ignore-taint.cluster-autoscaler.kubernetes.io/ prefixes) and the status
// taints (status-taint.): a pod that does not tolerate them still gets a
// node. berth made each a taint of the template for good, and such a pod
// got no node from the group. A startup taint is the group's startup
// taint now (a new node has it until it is up); a status taint is left
// out; dedicated=db stays.
func TestAnnotatedStartupAndStatusTaintsAreNotTheTemplates(t *testing.T) {
	kept := []v1alpha1.NodeTaint{{Key: "dedicated", Value: "db", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	startup := func(key string) []v1alpha1.NodeTaint {
		return []v1alpha1.NodeTaint{{Key: key, Value: "true", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	}
	for _, tc := range []struct {
		name, taints string
		startup      []v1alpha1.NodeTaint
	}{
		{"a startup taint", "startup-taint.cluster-autoscaler.kubernetes.io/cni=true:NoSchedule,dedicated=db:NoSchedule",
			startup("startup-taint.cluster-autoscaler.kubernetes.io/cni")},
		{"an ignore taint", "ignore-taint.cluster-autoscaler.kubernetes.io/gpu-driver=true:NoSchedule,dedicated=db:NoSchedule",
			startup("ignore-taint.cluster-autoscaler.kubernetes.io/gpu-driver")},
		{"a status taint", "status-taint.cluster-autoscaler.kubernetes.io/maintenance=true:NoSchedule,dedicated=db:NoSchedule", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := ParseAnnotations(map[string]string{AnnotationCPU: "4", AnnotationMemory: "16Gi", AnnotationTaints: tc.taints})
			if err != nil {
				t.Fatal(err)
			}
			ng := builders.NodeGroup("g")
			tmpl.Apply(ng)
			if diff := cmp.Diff(kept, ng.Spec.Template.Taints); diff != "" {
				t.Errorf("template taints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.startup, ng.Spec.Template.StartupTaints); diff != "" {
				t.Errorf("startup taints (-want +got):\n%s", diff)
			}
		})
	}
}

// capiGroup is a clusterAPI node group with the given consolidateAfter
// and machineTimeout (nil: not set).
func capiGroup(after, timeout *metav1.Duration) *v1alpha1.NodeGroup {
	ng := builders.NodeGroup("g")
	ng.Spec.Disruption.ConsolidateAfter = after
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: "md", MachineTimeout: timeout}}
	return ng
}
