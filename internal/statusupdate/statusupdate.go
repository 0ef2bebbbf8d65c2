// Package statusupdate writes the status subresource of berth's objects the
// same way in every controller.
package statusupdate

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Update writes obj's status. A conflict means the copy the caller read was
// stale (its cache lags the API server); the newer version's watch event
// reconciles the object again, so the conflict is logged at debug level and
// not returned: it is not an error worth a stack trace. Other errors are
// returned as they are.
func Update(ctx context.Context, c client.Client, obj client.Object) error {
	_, err := Write(ctx, c, obj)
	return err
}

// Write is Update that also says whether the status was written (false
// on a conflict): a caller whose side effects (an event, a metric) follow
// the new status makes them only then, not again when the newer version
// is reconciled.
func Write(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Status().Update(ctx, obj)
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("status changed meanwhile; the newer version is reconciled again",
			"object", client.ObjectKeyFromObject(obj).String())
		return false, nil
	}
	return err == nil, err
}
