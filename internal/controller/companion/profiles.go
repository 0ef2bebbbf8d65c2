package companion

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
)

// ProfileReconciler keeps berth's MutatingWebhookConfiguration present
// while some CompanionProfile exists and absent otherwise, and warns on a
// profile berth applies to no pod because it is not valid (one stored
// before the API server checked what it checks now).
type ProfileReconciler struct {
	Client client.Client
	// Recorder receives the warning on a profile that is not valid; nil:
	// none is sent.
	Recorder events.EventRecorder
	// Sync makes the webhook configuration present (want) or absent.
	Sync func(ctx context.Context, want bool) error
}

// The webhook's configuration and certificate Secret are read and written
// without the cache, by name (internal/webhook): create cannot be limited
// to a name, everything else is.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=berth-companion,verbs=get;update;delete
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=secrets,resourceNames=berth-webhook-cert,verbs=get;update

// Register adds the reconciler, and a sync once the cache has started (a
// configuration left from an earlier run without profiles goes) and
// every resyncConfig after: a configuration deleted or edited by hand is
// put back (berth may not watch other webhook configurations, so it
// looks again).
func (r *ProfileReconciler) Register(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named(Name + "-profiles").For(&v1alpha1.CompanionProfile{}).Complete(r); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		t := time.NewTicker(resyncConfig)
		defer t.Stop()
		for {
			if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
				// Not fatal: the next profile event, or tick, syncs again.
				log.FromContext(ctx).Error(err, "syncing the companion webhook configuration")
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}))
}

// resyncConfig is how often the webhook configuration is synced besides
// the profiles' events.
const resyncConfig = 5 * time.Minute

// Reconcile syncs the webhook configuration with the profiles, and warns
// on the profile req names (every profile for an empty req) when it is
// not valid.
func (r *ProfileReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	l := &v1alpha1.CompanionProfileList{}
	if err := r.Client.List(ctx, l); err != nil {
		return reconcile.Result{}, err
	}
	for i := range l.Items {
		p := &l.Items[i]
		if req.Name != "" && p.Name != req.Name {
			continue
		}
		if err := companion.Validate(p); err != nil && r.Recorder != nil {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonProfileInvalid, "Validate",
				"berth applies this profile to no pod until it is fixed: %v", err)
		}
	}
	return reconcile.Result{}, r.Sync(ctx, len(l.Items) > 0)
}
