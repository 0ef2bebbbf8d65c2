package companion_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
)

const driver = "s3.csi.aws.com"

// objects is an in-memory companion.Lookup (pure code under test).
type objects struct {
	ns  map[string]labels.Set
	pvc map[string]*corev1.PersistentVolumeClaim
	pv  map[string]*corev1.PersistentVolume
	sc  map[string]*storagev1.StorageClass
}

func (o objects) NamespaceLabels(_ context.Context, n string) (labels.Set, error) {
	return o.ns[n], nil
}
func (o objects) Claim(_ context.Context, ns, n string) (*corev1.PersistentVolumeClaim, error) {
	return o.pvc[ns+"/"+n], nil
}
func (o objects) Volume(_ context.Context, n string) (*corev1.PersistentVolume, error) {
	return o.pv[n], nil
}
func (o objects) StorageClass(_ context.Context, n string) (*storagev1.StorageClass, error) {
	return o.sc[n], nil
}

func world() objects {
	sc := "s3"
	other := "ebs"
	return objects{
		ns: map[string]labels.Set{"team": {"fuse": "on"}, "plain": {}},
		pvc: map[string]*corev1.PersistentVolumeClaim{
			"team/bucket":   {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-bucket"}},
			"team/bucket2":  {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-bucket2"}},
			"team/pending":  {Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}},
			"team/disk":     {Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &other}},
			"team/ebs-disk": {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-ebs"}},
		},
		pv: map[string]*corev1.PersistentVolume{
			"pv-bucket": {ObjectMeta: metav1.ObjectMeta{Name: "pv-bucket"}, Spec: corev1.PersistentVolumeSpec{
				MountOptions:           []string{"allow-other"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeAttributes: map[string]string{"mountpointContainerResourcesRequestsCpu": "750m", "mountpointContainerResourcesRequestsMemory": "bad"}}}}},
			"pv-bucket2": {ObjectMeta: metav1.ObjectMeta{Name: "pv-bucket2"}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver}}}},
			"pv-ebs": {ObjectMeta: metav1.ObjectMeta{Name: "pv-ebs"}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com"}}}},
		},
		sc: map[string]*storagev1.StorageClass{"s3": {Provisioner: driver}, "ebs": {Provisioner: "ebs.csi.aws.com"}},
	}
}

func pod(name, ns string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func mountpoint() *v1alpha1.CompanionProfile {
	return &v1alpha1.CompanionProfile{ObjectMeta: metav1.ObjectMeta{Name: "mountpoint"}, Spec: v1alpha1.CompanionProfileSpec{
		Workloads: v1alpha1.CompanionWorkloads{CSIDriver: driver},
		Companion: v1alpha1.CompanionShape{
			Resources:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			FromVolumeAttributes: &v1alpha1.CompanionAttributes{CPU: "mountpointContainerResourcesRequestsCpu", Memory: "mountpointContainerResourcesRequestsMemory"},
		},
		Recognize: mountPods(),
	}}
}

// mountPods recognises the driver's mount pods in mount-s3.
func mountPods() v1alpha1.CompanionRecognition {
	return v1alpha1.CompanionRecognition{Namespace: "mount-s3", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "mountpoint"}}}
}

func TestSelects(t *testing.T) {
	ctx := context.Background()
	byNamespace := &v1alpha1.CompanionProfile{Spec: v1alpha1.CompanionProfileSpec{Workloads: v1alpha1.CompanionWorkloads{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fuse": "on"}}}, Recognize: mountPods()}}
	broken := mountpoint()
	broken.Spec.Workloads.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "bad key", Operator: metav1.LabelSelectorOpExists}}}
	anyNamespace := mountpoint()
	anyNamespace.Spec.Recognize.Namespace = ""
	placeholder := pod("companion-x", "team", "bucket")
	placeholder.Labels = map[string]string{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}
	daemon := pod("agent-x", "team")
	daemon.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-agent", Controller: ptr.To(true)}}
	placed := pod("w", "team")
	placed.Spec.NodeName = "node-a"
	for _, tc := range []struct {
		name    string
		profile *v1alpha1.CompanionProfile
		pod     *corev1.Pod
		want    bool
	}{
		{"a pod with a bound claim of the driver is selected", mountpoint(), pod("w", "team", "bucket"), true},
		{"a pod whose claim of the driver is not bound yet is selected by its storage class", mountpoint(), pod("w", "team", "pending"), true},
		{"a pod with claims of other drivers only is not selected", mountpoint(), pod("w", "team", "disk", "ebs-disk"), false},
		{"a pod with an unbound claim of another driver and one of the driver is selected", mountpoint(), pod("w", "team", "disk", "bucket"), true},
		{"a pod whose claim does not exist is not selected", mountpoint(), pod("w", "team", "missing"), false},
		{"a pod in a namespace the selector matches is selected", byNamespace, pod("w", "team"), true},
		{"a pod in another namespace is not", byNamespace, pod("w", "plain"), false},
		{"berth's own placeholder is never selected", mountpoint(), placeholder, false},
		{"a DaemonSet's pod is not selected: berth never nominates a node for it", byNamespace, daemon, false},
		{"a pod created with its node set is not selected", byNamespace, placed, false},
		{"a profile whose selector the code rejects selects nothing, without an error", broken, pod("w", "team", "bucket"), false},
		{"a profile that recognises companions in any namespace selects nothing", anyNamespace, pod("w", "team", "bucket"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := companion.Selects(ctx, tc.profile, tc.pod, world())
			if err != nil || got != tc.want {
				t.Errorf("Selects = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCompanionSizeAndShareKey(t *testing.T) {
	ctx := context.Background()
	p := mountpoint()
	a, err := companion.For(ctx, p, pod("a", "team", "bucket"), world())
	if err != nil {
		t.Fatal(err)
	}
	// cpu from the volume attribute, memory from the profile (the
	// attribute is not a quantity).
	if cpu, mem := a.Requests[corev1.ResourceCPU], a.Requests[corev1.ResourceMemory]; cpu.String() != "750m" || mem.String() != "128Mi" {
		t.Errorf("requests = %v, want cpu 750m (attribute), memory 128Mi (default)", a.Requests)
	}
	b, _ := companion.For(ctx, p, pod("b", "team", "bucket"), world())
	c, _ := companion.For(ctx, p, pod("c", "team", "bucket2"), world())
	u1, _ := companion.For(ctx, p, pod("u1", "team", "pending"), world())
	u2, _ := companion.For(ctx, p, pod("u2", "team", "pending"), world())
	if a.ShareKey != b.ShareKey {
		t.Error("two pods of one volume must share a companion")
	}
	if a.ShareKey == c.ShareKey {
		t.Error("pods of different volumes must not share")
	}
	if u1.ShareKey == u2.ShareKey {
		t.Error("pods whose volume is not bound yet must not share")
	}
	if len(a.ShareKey) > 63 {
		t.Errorf("share key %q is not a label value", a.ShareKey)
	}
	none := mountpoint()
	none.Spec.ShareBy = v1alpha1.ShareByNone
	n1, _ := companion.For(ctx, none, pod("a", "team", "bucket"), world())
	n2, _ := companion.For(ctx, none, pod("b", "team", "bucket"), world())
	if n1.ShareKey == n2.ShareKey {
		t.Error("shareBy None: every pod has its own companion")
	}
	opts := mountpoint()
	opts.Spec.ShareBy = v1alpha1.ShareByVolumeAndMountOptions
	o1, _ := companion.For(ctx, opts, pod("a", "team", "bucket"), world())
	if o1.ShareKey == a.ShareKey {
		t.Error("VolumeAndMountOptions must key on the mount options too")
	}
}

// TestABrokenProfileDoesNotStopTheOthers: profiles are tried by name; one
// whose selector the code rejects (stored before the API server checked
// it) neither selects pods nor keeps the next profile from selecting
// them.
func TestABrokenProfileDoesNotStopTheOthers(t *testing.T) {
	broken := mountpoint()
	broken.Name = "a-broken"
	broken.Spec.Workloads.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"x"}}}}
	valid := mountpoint()
	valid.Name = "b-valid"
	got, err := companion.Selecting(context.Background(), []v1alpha1.CompanionProfile{*valid, *broken}, pod("w", "team", "bucket"), world())
	if err != nil || got == nil || got.Name != "b-valid" {
		t.Fatalf("Selecting = %v, %v; want profile b-valid", got, err)
	}
	if err := companion.Validate(broken); err == nil || !strings.Contains(err.Error(), "spec.workloads.podSelector") {
		t.Errorf("Validate(broken) = %v, want an error naming spec.workloads.podSelector", err)
	}
}

func TestRecognizes(t *testing.T) {
	mount := func(ns string, labels map[string]string) *corev1.Pod {
		p := pod("mount", ns)
		p.Labels = labels
		return p
	}
	anyNamespace := mountpoint()
	anyNamespace.Spec.Recognize.Namespace = ""
	brokenSelector := mountpoint()
	brokenSelector.Spec.Recognize.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals"}}}
	for _, tc := range []struct {
		name    string
		profile *v1alpha1.CompanionProfile
		pod     *corev1.Pod
		want    bool
	}{
		{"a pod with the labels in the profile's namespace is a companion", mountpoint(), mount("mount-s3", map[string]string{"app": "mountpoint"}), true},
		{"a user's pod with the same labels in another namespace is not", mountpoint(), mount("team", map[string]string{"app": "mountpoint"}), false},
		{"a pod in the namespace without the labels is not", mountpoint(), mount("mount-s3", map[string]string{"app": "other"}), false},
		{"a profile stored without a namespace recognises no pod, whatever its namespace", anyNamespace, mount("team", map[string]string{"app": "mountpoint"}), false},
		{"a profile whose selector the code rejects recognises no pod", brokenSelector, mount("mount-s3", map[string]string{"app": "mountpoint"}), false},
		{"berth's own placeholder is never a companion", mountpoint(),
			mount("mount-s3", map[string]string{"app": "mountpoint", v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := companion.Recognizes(tc.profile, tc.pod); got != tc.want {
				t.Errorf("Recognizes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequests(t *testing.T) {
	annotated := func(raw string) *corev1.Pod {
		p := pod("w", "team")
		p.Annotations = map[string]string{v1alpha1.AnnotationCompanionRequests: raw}
		return p
	}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		want      corev1.ResourceList
		wantFound bool
		wantErr   bool
	}{
		{name: "a pod without the annotation has no companion requests", pod: pod("w", "team")},
		{name: "cpu and memory are read", pod: annotated(`{"cpu":"500m","memory":"256Mi"}`), wantFound: true,
			want: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
		{name: "anything but cpu and memory is left out of the room held", pod: annotated(`{"cpu":"500m","nvidia.com/gpu":"8"}`), wantFound: true,
			want: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		{name: "an annotation that is not JSON is an error", pod: annotated(`cpu=500m`), wantFound: true, wantErr: true},
		{name: "a quantity that is not one is an error", pod: annotated(`{"cpu":"lots"}`), wantFound: true, wantErr: true},
		{name: "a negative request is an error", pod: annotated(`{"cpu":"-1"}`), wantFound: true, wantErr: true},
		{name: "a request of a million cores is an error", pod: annotated(`{"cpu":"1000000"}`), wantFound: true, wantErr: true},
		{name: "an annotation with no cpu or memory is an error", pod: annotated(`{}`), wantFound: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := companion.Requests(tc.pod)
			if found != tc.wantFound || (err != nil) != tc.wantErr {
				t.Fatalf("Requests = %v, found %v, err %v; want found %v, error %v", got, found, err, tc.wantFound, tc.wantErr)
			}
			if !tc.wantErr && !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Requests = %v, want %v", got, tc.want)
			}
		})
	}
}
