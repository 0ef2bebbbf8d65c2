package standby

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
)

// suspendBooted suspends the booted nodes; those it suspended move from
// booting to suspended. One that a pod other than a DaemonSet's was bound
// to (a pod that tolerates the standby taint) is released to the running
// capacity instead: it leaves the standby tier, and its units are
// launched again.
func (r *Reconciler) suspendBooted(ctx context.Context, acct *account) error {
	for _, n := range acct.booted {
		busy, err := r.busy(ctx, n.Name)
		if err != nil {
			return err
		}
		if busy != "" {
			released, err := r.release(ctx, n, busy)
			if err != nil {
				return err
			}
			if released {
				acct.booting = slices.DeleteFunc(acct.booting, func(b *corev1.Node) bool { return b.Name == n.Name })
				acct.units -= acct.counted[n.Name]
			}
			continue
		}
		if !r.suspend(ctx, n) {
			continue
		}
		acct.booting = slices.DeleteFunc(acct.booting, func(b *corev1.Node) bool { return b.Name == n.Name })
		acct.suspended = append(acct.suspended, n)
	}
	acct.booted = nil
	return nil
}

// resumeBusy resumes each of the suspended nodes a pod other than a
// DaemonSet's was bound to (one that tolerates the standby and not-ready
// taints): a stopped machine never runs it. Resume makes the node an
// ordinary node of its group, which scale-down removes once it is empty.
// It returns the nodes left; with acct, the units of those resumed leave
// the count (they are launched again). Each node's pods are read from the
// API server (a pod's binding may not be in the cache yet), so a pass
// costs one list per suspended node.
func (r *Reconciler) resumeBusy(ctx context.Context, nodes []*corev1.Node, acct *account) ([]*corev1.Node, error) {
	s, ok := r.Cloud.(cloudprovider.Suspender)
	if !ok || len(nodes) == 0 {
		return nodes, nil
	}
	left := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		busy, err := r.busy(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		if busy == "" {
			left = append(left, n)
			continue
		}
		if err := s.Resume(ctx, n.Name); err != nil {
			log.FromContext(ctx).Info("could not resume a suspended standby node a pod was bound to", "node", n.Name, "pod", busy, "error", err.Error())
			left = append(left, n)
			continue
		}
		r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonReleased, "Release",
			"Resumed suspended standby node %s of %s to running capacity: pod %s was bound to it (it tolerates the standby taint); its units are launched again",
			n.Name, n.Annotations[v1alpha1.AnnotationStandbyFor], busy)
		if acct != nil {
			acct.units -= acct.counted[n.Name]
		}
	}
	return left, nil
}

// suspend suspends a booted standby node that runs nothing (checked just
// before); it reports whether it did.
func (r *Reconciler) suspend(ctx context.Context, n *corev1.Node) bool {
	s, ok := r.Cloud.(cloudprovider.Suspender)
	if !ok {
		return false
	}
	if err := s.Suspend(ctx, n.Name); err != nil {
		log.FromContext(ctx).Info("could not suspend standby node", "node", n.Name, "error", err.Error())
		return false
	}
	r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonSuspended, "Suspend", "Suspended standby node %s for Headroom %s", n.Name, n.Annotations[v1alpha1.AnnotationStandbyFor])
	return true
}

// release takes a booted standby node that runs a pod out of the standby
// tier (its taint, label and owner annotation go, at the version read, so
// that a concurrent change wins): from then on it is an ordinary node of
// its group, which scale-down removes once it is empty. It reports
// whether it did.
func (r *Reconciler) release(ctx context.Context, n *corev1.Node, pod string) (bool, error) {
	released := n.DeepCopy()
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	nodeutil.LeaveStandby(released)
	delete(released.Annotations, v1alpha1.AnnotationSuspendedAt) // a suspension cut short: the machine runs
	if err := r.Client.Patch(ctx, released, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil // seen again on the next pass
		}
		return false, fmt.Errorf("releasing standby node %s: %w", n.Name, err)
	}
	r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonReleased, "Release",
		"Released standby node %s of %s to running capacity: pod %s runs on it (it tolerates the standby taint); its units are launched again",
		n.Name, n.Annotations[v1alpha1.AnnotationStandbyFor], pod)
	return true, nil
}

// busy names a pod on the node that is neither a DaemonSet's, a static
// pod's mirror nor finished, read from the API server; "" when there is
// none.
func (r *Reconciler) busy(ctx context.Context, node string) (string, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return "", fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if podutil.IsTerminal(p) || podutil.IsDaemonSetPod(p) || podutil.IsMirror(p) {
			continue
		}
		return p.Namespace + "/" + p.Name, nil
	}
	return "", nil
}
