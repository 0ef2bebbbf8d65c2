package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestUnknownTypeOrGroupIsReportedNotCrashedOn: a tenant of a type that
// does not exist, or whose node group does not exist, is Failed with a
// reason that says which, gets an event, and nothing is created for it.
func TestUnknownTypeOrGroupIsReportedNotCrashedOn(t *testing.T) {
	create(t, tenantType("orphan-type", "no-such-group"),
		newTenant("lost-1", "no-such-type", nil), newTenant("lost-2", "orphan-type", nil))
	r, log, rec := reconciler(t)
	for _, tc := range []struct{ tenant, reason, says string }{
		{"lost-1", v1alpha1.ReasonTypeNotFound, `tenant type "no-such-type" does not exist`},
		{"lost-2", v1alpha1.ReasonNodeGroupNotFound, `node group "no-such-group" of tenant type orphan-type does not exist`},
	} {
		reconcileOnce(t, r, tc.tenant)
		ten := getTenant(t, tc.tenant)
		c := meta.FindStatusCondition(ten.Status.Conditions, v1alpha1.ConditionReady)
		if ten.Status.Phase != v1alpha1.TenantFailed || c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) {
			t.Errorf("%s: phase %s, condition %+v; want Failed, %s, %q", tc.tenant, ten.Status.Phase, c, tc.reason, tc.says)
		}
		if evs := rec.For(tc.tenant); len(evs) != 1 || evs[0].Reason != tc.reason || evs[0].Type != corev1.EventTypeWarning {
			t.Errorf("%s: events %+v", tc.tenant, evs)
		}
	}
	if got := log.get(); len(got) != 0 {
		t.Errorf("objects applied for tenants that cannot run: %v", got)
	}
}

// TestForeignNamespaceIsNotTakenOver: when tenant-<name> already exists
// and is not the tenant's, berth neither adopts it (deleting the tenant
// would delete it) nor creates anything in it, and says why.
func TestForeignNamespaceIsNotTakenOver(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-squat-1", Labels: map[string]string{"team": "someone"}}},
		b.NodeGroup("squat-group"), tenantType("squat-type", "squat-group"), newTenant("squat-1", "squat-type", nil))
	r, log, _ := reconciler(t)
	if res := reconcileOnce(t, r, "squat-1"); res.RequeueAfter == 0 {
		t.Error("not looked at again (a former tenant's namespace goes away by itself)")
	}
	ten := getTenant(t, "squat-1")
	if c := meta.FindStatusCondition(ten.Status.Conditions, v1alpha1.ConditionReady); ten.Status.Phase != v1alpha1.TenantFailed ||
		c == nil || c.Reason != v1alpha1.ReasonNamespaceTaken || !strings.Contains(c.Message, "does not belong to this tenant") {
		t.Errorf("phase %s, condition %+v; want Failed, NamespaceTaken", ten.Status.Phase, c)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "tenant-squat-1"}, ns); err != nil {
		t.Fatal(err)
	}
	if len(ns.OwnerReferences) != 0 || ns.Labels[v1alpha1.LabelTenant] != "" {
		t.Errorf("the foreign namespace was changed: owners %v, labels %v", ns.OwnerReferences, ns.Labels)
	}
	if got := log.get(); len(got) != 0 {
		t.Errorf("applied %v into a namespace that is not the tenant's", got)
	}
}

// TestForeignNamespaceTheCacheHasNotShownIsNotTakenOver: the same with a
// controller whose cache has not seen the namespace yet (it reads as not
// found): berth creates the namespace rather than applying it, finds it
// exists, and still leaves it alone; the tenant says why.
func TestForeignNamespaceTheCacheHasNotShownIsNotTakenOver(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-lag-1", Labels: map[string]string{"team": "someone"}}},
		b.NodeGroup("lag-group"), tenantType("lag-type", "lag-group"), newTenant("lag-1", "lag-type", nil))
	r, log, _ := reconciler(t)
	r.Client = interceptor.NewClient(r.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name) // a cache that lags
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "lag-1"}}); err == nil {
		t.Error("no error: retried with backoff is expected")
	}
	ten := getTenant(t, "lag-1")
	if c := meta.FindStatusCondition(ten.Status.Conditions, v1alpha1.ConditionReady); ten.Status.Phase != v1alpha1.TenantFailed ||
		c == nil || c.Reason != v1alpha1.ReasonApplyFailed || !strings.Contains(c.Message, "does not belong to tenant lag-1") {
		t.Errorf("phase %s, condition %+v; want Failed, ApplyFailed naming the namespace", ten.Status.Phase, c)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "tenant-lag-1"}, ns); err != nil {
		t.Fatal(err)
	}
	if len(ns.OwnerReferences) != 0 || ns.Labels[v1alpha1.LabelTenant] != "" {
		t.Errorf("the foreign namespace was changed: owners %v, labels %v", ns.OwnerReferences, ns.Labels)
	}
	if got := log.get(); len(got) != 0 {
		t.Errorf("applied %v into a namespace that is not the tenant's", got)
	}
}

// TestATransitionIsRecordedOnlyWhenItsStatusIsWritten: a pass that read a
// stale tenant (the status the last pass wrote not in its copy yet) sees
// the same transition again; its status write conflicts and is dropped,
// and so is the transition: no second event, no second count. Before, the
// event and the metrics were recorded before the write.
func TestATransitionIsRecordedOnlyWhenItsStatusIsWritten(t *testing.T) {
	create(t, newTenant("stale-1", "no-such-type", nil))
	r, _, rec := reconciler(t)
	conflicting := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("tenants").GroupResource(), obj.GetName(), errors.New("the object has been modified"))
		},
	})
	stale := *r
	stale.Client = conflicting
	reconcileOnce(t, &stale, "stale-1")
	if evs := rec.For("stale-1"); len(evs) != 0 {
		t.Errorf("events %+v from a pass whose status write conflicted, want none", evs)
	}
	reconcileOnce(t, r, "stale-1")
	if evs := rec.For("stale-1"); len(evs) != 1 || evs[0].Reason != v1alpha1.ReasonTypeNotFound {
		t.Errorf("events %+v after the pass that wrote the status, want one %s", evs, v1alpha1.ReasonTypeNotFound)
	}
}

// TestAPodTheClusterRefusesIsNamedInTheStatus: an admission policy of the
// cluster refuses the tenant's pod (as a quota or Pod Security would);
// the Deployment's ReplicaSet cannot create it, and the tenant's status
// says why instead of "waiting for the Deployment to create the pod" for
// ever.
func TestAPodTheClusterRefusesIsNamedInTheStatus(t *testing.T) {
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-pods-for-refused-1"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.metadata.labels) || !('" + v1alpha1.LabelTenant + "' in object.metadata.labels) || object.metadata.labels['" + v1alpha1.LabelTenant + "'] != 'refused-1'",
				Message: "no pods here (test policy)"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-pods-for-refused-1"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	create(t, policy, binding)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding); _ = env.Client.Delete(ctx, policy) })
	// The API server enforces a new policy a moment later: a pod of the
	// tenant's labels is tried (dry run) until it is refused.
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		probe := b.Pod("probe", b.Labels(v1alpha1.LabelTenant, "refused-1"))
		err := env.Client.Create(ctx, probe, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "no pods here"), fmt.Sprintf("a probe pod: %v", err), nil
	})
	create(t, b.NodeGroup("refused-group"), tenantType("refused-type", "refused-group"), newTenant("refused-1", "refused-type", nil))
	r, _, _ := reconciler(t)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "refused-1"}}); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(getTenant(t, "refused-1").Status.Conditions, v1alpha1.ConditionScheduled)
		return c != nil && strings.Contains(c.Message, "no pods here"), fmt.Sprintf("condition %+v", c), nil
	})
}
