package standby

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// removeSurplus deletes one of the candidates and reports whether it
// did: with keep, only one whose
// units (of units in all) are not needed to hold desired; without, any.
// Only one that berth launched, still standby when read fresh, running no
// pod but DaemonSets'. why says, in its event, why the node goes.
func (r *Reconciler) removeSurplus(ctx context.Context, keep bool, candidates []*corev1.Node, units, desired int32, unitsOn func(*corev1.Node) int32,
	why string) (bool, error) {
	for _, n := range candidates {
		fit := unitsOn(n)
		if keep && units-fit < desired {
			continue
		}
		fresh := &corev1.Node{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: n.Name}, fresh); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if !nodeutil.Standby(fresh) || fresh.DeletionTimestamp != nil || fresh.Annotations[v1alpha1.AnnotationLaunchedBy] != n.Annotations[v1alpha1.AnnotationLaunchedBy] {
			continue // resumed meanwhile: no longer the standby tier's
		}
		if busy, err := r.busy(ctx, n.Name); err != nil || busy != "" {
			if err != nil {
				return false, err
			}
			continue
		}
		// Marked at the version read: a resume in between makes the mark
		// fail, and a resume after it sees the node is going.
		patch := client.MergeFromWithOptions(fresh.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if fresh.Annotations == nil {
			fresh.Annotations = map[string]string{}
		}
		fresh.Annotations[v1alpha1.AnnotationStandbyRemoving] = r.Clock.Now().UTC().Format(time.RFC3339)
		if err := r.Client.Patch(ctx, fresh, patch); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("marking standby node %s for removal: %w", n.Name, err)
		}
		if err := r.Cloud.Delete(ctx, n.Name); err != nil && !cloudprovider.IsNotFound(err) {
			return false, fmt.Errorf("deleting surplus standby node %s: %w", n.Name, err)
		}
		r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonRemoved, "Delete", "Deleted standby node %s: %s", n.Name, why)
		return true, nil // one per reconcile: the next one sees the cluster after it
	}
	return false, nil
}
