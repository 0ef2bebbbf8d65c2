package policy_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
)

// TestBerthRunsOnlyPlaceholdersInItsNamespace: berth's account creates
// the headroom placeholders' Deployment and the per-node reserve's
// DaemonSet as berth builds them, but no pod or pod template in
// berth-system that carries other labels than berth's: such a pod could
// become an endpoint of berth's own webhook Service, whose serving
// certificate berth's account can read.
func TestBerthRunsOnlyPlaceholdersInItsNamespace(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "spare"}, Spec: v1alpha1.HeadroomSpec{PerNode: &v1alpha1.PerNodeReserve{Resources: cpu}}}
	placeholders := func(template corev1.PodTemplateSpec) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "headroom-spare", Namespace: v1alpha1.SystemNamespace},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: template.Labels}, Template: template}}
	}
	template := hr.PlaceholderTemplate(h, hr.Resolved{Count: 1, Shape: v1alpha1.UnitShape{Resources: cpu}})
	for _, o := range []client.Object{placeholders(template), hr.NodeReserveDaemonSet(h)} {
		if err := berth.Create(ctx, o, client.DryRunAll); err != nil {
			t.Errorf("berth creating its %T %s: %v", o, o.GetName(), err)
		}
	}

	serviceLabels := map[string]string{"app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "berth"}
	disguised := *template.DeepCopy()
	for k, v := range serviceLabels {
		disguised.Labels[k] = v
	}
	unlabelled := *template.DeepCopy()
	unlabelled.Labels = map[string]string{v1alpha1.LabelHeadroom: "spare"}
	for _, c := range []struct {
		name string
		obj  client.Object
	}{
		{"a placeholder pod with the controller's labels", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "disguised", Namespace: v1alpha1.SystemNamespace, Labels: disguised.Labels}, Spec: disguised.Spec}},
		{"a placeholder Deployment whose pods have the controller's labels", placeholders(disguised)},
		{"a pod that is no placeholder (no berth.dev/headroom-role)", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: v1alpha1.SystemNamespace, Labels: unlabelled.Labels}, Spec: unlabelled.Spec}},
	} {
		if err := berth.Create(ctx, c.obj, client.DryRunAll); !deniedBy(err, systemPolicy) {
			t.Errorf("berth's account could create %s in berth-system: %v, want refused by %s", c.name, err, systemPolicy)
		}
	}
}
