package headroom_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/headroom"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestAPlaceholderDeploymentBerthMayNotCreateIsReported: the API server
// refuses the placeholder Deployment as forbidden (berth's RBAC lacks a
// right, or OwnerReferencesPermissionEnforcement refuses its owner
// reference, as on OpenShift). The Headroom says so in its Ready
// condition (reason Forbidden) and an event, and the write is retried;
// before, only the controller's log said why no headroom was kept.
func TestAPlaceholderDeploymentBerthMayNotCreateIsReported(t *testing.T) {
	ensureNamespace(t)
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "ph-forbidden"}, Spec: v1alpha1.HeadroomSpec{Units: units(1), Placeholders: true}})
	r, _, ev := reconciler()
	r.Client = interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*appsv1.Deployment); ok {
				return apierrors.NewForbidden(appsv1.Resource("deployments"), obj.GetName(),
					apierrors.NewBadRequest("cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"))
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "ph-forbidden"}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("reconcile: %v, want the Forbidden error, to be retried", err)
	}
	c := meta.FindStatusCondition(get(t, "ph-forbidden").Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonForbidden || !strings.Contains(c.Message, "blockOwnerDeletion") {
		t.Errorf("Ready condition %+v, want False, Forbidden, with the API server's answer", c)
	}
	if !slices.ContainsFunc(ev.For("ph-forbidden"), func(e fakes.Event) bool { return e.Reason == headroom.ReasonForbidden }) {
		t.Errorf("events %+v, want %s", ev.For("ph-forbidden"), headroom.ReasonForbidden)
	}
}
