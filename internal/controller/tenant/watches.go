package tenant

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// tenantsOfType maps a TenantType to the tenants of that type.
func (r *Reconciler) tenantsOfType(ctx context.Context, o client.Object) []reconcile.Request {
	return r.tenantsOf(ctx, map[string]bool{o.GetName(): true})
}

// tenantsOfGroup maps a NodeGroup to the tenants of the types on it.
func (r *Reconciler) tenantsOfGroup(ctx context.Context, o client.Object) []reconcile.Request {
	types := &v1alpha1.TenantTypeList{}
	if err := r.Client.List(ctx, types); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing tenant types")
		return nil
	}
	names := map[string]bool{}
	for _, tt := range types.Items {
		if tt.Spec.NodeGroup == o.GetName() {
			names[tt.Name] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	return r.tenantsOf(ctx, names)
}

func (r *Reconciler) tenantsOf(ctx context.Context, types map[string]bool) []reconcile.Request {
	tenants := &v1alpha1.TenantList{}
	if err := r.Client.List(ctx, tenants); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing tenants")
		return nil
	}
	var out []reconcile.Request
	for _, t := range tenants.Items {
		if types[t.Spec.Type] {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}})
		}
	}
	return out
}
