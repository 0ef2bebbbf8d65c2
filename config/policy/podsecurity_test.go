package policy_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
)

// TestBerthSystemPodsMeetRestricted: berth-system, labelled as
// config/system/namespace.yaml says, refuses a pod that does not meet the
// restricted Pod Security profile, and admits the pods berth has the
// ReplicaSet and DaemonSet controllers create there (headroom placeholders
// and the per-node reserve), as berth builds them. (The companion
// placeholder berth creates itself is admitted in
// TestCompanionHeadroomWorksUnderThePolicies.)
func TestBerthSystemPodsMeetRestricted(t *testing.T) {
	installed(t)
	ctx := context.Background()
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "spare"}, Spec: v1alpha1.HeadroomSpec{
		PerNode: &v1alpha1.PerNodeReserve{Resources: cpu},
	}}
	pod := func(name string, t corev1.PodTemplateSpec) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1alpha1.SystemNamespace, Labels: t.Labels}, Spec: t.Spec}
	}
	for _, p := range []*corev1.Pod{
		pod("placeholder", hr.PlaceholderTemplate(h, hr.Resolved{Count: 1, Shape: v1alpha1.UnitShape{Resources: cpu}})),
		pod("reserve", hr.NodeReserveDaemonSet(h).Spec.Template),
	} {
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
			t.Errorf("berth-system refuses berth's %s pod: %v", p.Name, err)
		}
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: v1alpha1.SystemNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: hr.PauseImage}}}}
	if err := env.Client.Create(ctx, plain, client.DryRunAll); err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Errorf("creating a pod without a security context in berth-system: %v, want refused by Pod Security (restricted)", err)
	}
}
