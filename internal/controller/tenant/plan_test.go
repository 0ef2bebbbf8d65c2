package tenant

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestPlannerHonoursTheTenantPodSpec: berth's planner, given the pods the
// tenant controller's Deployments make, puts tenants only on their
// type's group (selector and tolerations derived from it, though another
// group is cheaper), gives each dedicated tenant a node of its own even
// when several would fit on one, in any namespace and in both directions
// of the anti-affinity, and lets shared tenants share.
func TestPlannerHonoursTheTenantPodSpec(t *testing.T) {
	large := b.NodeGroup("large", b.TemplateLabel("size", "large"), b.TemplateTaint("size", "large", corev1.TaintEffectNoSchedule),
		b.InstanceType("t3a.xlarge", "4", "16Gi", b.OnDemand("zone-a", "0.20")))
	general := b.NodeGroup("general", b.InstanceType("c-8", "8", "32Gi", b.OnDemand("zone-a", "0.01")))
	typ := func(name string, dedicated bool) *v1alpha1.TenantType {
		return &v1alpha1.TenantType{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TenantTypeSpec{
			NodeGroup: "large", DedicatedNode: ptr.To(dedicated),
			Template: v1alpha1.TenantTemplate{Image: "pause", Resources: v1alpha1.TenantResources{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}
	}
	premium, shared := typ("premium", true), typ("shared", false)
	tests := []struct {
		name    string
		tenants []*v1alpha1.TenantType // one tenant of each, named t-0, t-1, ...
		// want is the number of tenant pods on each new node, sorted.
		want []int
	}{
		{"three dedicated tenants get three large nodes", []*v1alpha1.TenantType{premium, premium, premium}, []int{1, 1, 1}},
		{"three shared tenants share one large node", []*v1alpha1.TenantType{shared, shared, shared}, []int{3}},
		{"a dedicated tenant keeps shared ones off its node", []*v1alpha1.TenantType{premium, shared, shared}, []int{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{large, general}}
			for i, tt := range tc.tenants {
				ten := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t-%d", i)}, Spec: v1alpha1.TenantSpec{Type: tt.Name}}
				d := deployment(ten, tt, large, nil)
				in.Namespaces = append(in.Namespaces, namespace(ten))
				in.Pending = append(in.Pending, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: ten.Name, Namespace: d.Namespace, Labels: d.Spec.Template.Labels, UID: types.UID(ten.Name)},
					Spec:       d.Spec.Template.Spec,
				})
			}
			plan, err := scaleup.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, n := range plan.NewNodes {
				if n.NodeGroup != "large" {
					t.Errorf("a tenant planned on %s, not its type's group", n.NodeGroup)
				}
				got = append(got, len(n.Pods))
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" || len(plan.Unschedulable) > 0 {
				t.Errorf("tenants per new node (-want +got):\n%s\nunschedulable: %+v", diff, plan.Unschedulable)
			}
		})
	}
}
