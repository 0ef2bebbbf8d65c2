package nodegroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// Event reasons of a NodeGroup's deletion.
const (
	// ReasonDrainingNodes: the NodeGroup goes once its nodes are removed.
	ReasonDrainingNodes = "DrainingNodes"
	// ReasonOrphaned is on a node left running by its deleted NodeGroup.
	ReasonOrphaned = "Orphaned"
	// ReasonUnadoptedUnknown: a NodeGroup deleted with Drain goes without
	// knowing whether machines launched for it are still booting.
	ReasonUnadoptedUnknown = "BootingMachinesUnknown"
)

// finalizeAfter is how often a NodeGroup being deleted looks at its nodes.
const finalizeAfter = 10 * time.Second

// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups,verbs=patch;update
// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=patch

// ensureFinalizer adds the finalizer that holds a NodeGroup's deletion
// until its nodes are dealt with.
func (r *Reconciler) ensureFinalizer(ctx context.Context, ng *v1alpha1.NodeGroup) error {
	if controllerutil.ContainsFinalizer(ng, v1alpha1.FinalizerNodes) {
		return nil
	}
	patch := client.MergeFromWithOptions(ng.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(ng, v1alpha1.FinalizerNodes)
	if err := r.Client.Patch(ctx, ng, patch); apierrors.IsConflict(err) {
		// A stale copy: the newer version is reconciled again.
		log.FromContext(ctx).V(1).Info("node group changed meanwhile; the newer version is reconciled again", "nodeGroup", ng.Name)
		return nil
	} else if err != nil {
		return fmt.Errorf("adding the finalizer of %s: %w", ng.Name, err)
	}
	return nil
}

// finalize lets a NodeGroup being deleted go once its nodes are: removed
// by scale-down (Drain), or left running without berth's marks (Orphan).
func (r *Reconciler) finalize(ctx context.Context, ng *v1alpha1.NodeGroup, nodes []corev1.Node) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(ng, v1alpha1.FinalizerNodes) {
		return reconcile.Result{}, nil
	}
	var owned []*corev1.Node
	for i := range nodes {
		if nodes[i].Annotations[v1alpha1.AnnotationLaunchedBy] == string(ng.UID) {
			owned = append(owned, &nodes[i])
		}
	}
	if ng.Spec.DeletionPolicy == v1alpha1.DeletionOrphan {
		// A node whose removal the provider accepted is going whatever
		// the policy: untainted, it would take pods that die with it. The
		// group waits for it to go.
		var going []*corev1.Node
		for _, n := range owned {
			if _, accepted := n.Annotations[v1alpha1.AnnotationRemovalAccepted]; accepted {
				going = append(going, n)
				continue
			}
			// A removal the provider holds half-done (a Cluster API
			// Machine marked, its replicas not lowered) is undone first:
			// left, a later removal in the same object would take this
			// node, no longer berth's, with it. One too far to undo is
			// going, as an accepted one.
			if err := r.cancelRemoval(ctx, n); cloudprovider.IsRemovalCommitted(err) {
				going = append(going, n)
				continue
			} else if err != nil {
				return reconcile.Result{}, err
			}
			if err := r.orphan(ctx, ng, n); err != nil {
				return reconcile.Result{}, err
			}
		}
		owned = going
	}
	booting := 0
	if ng.Spec.DeletionPolicy != v1alpha1.DeletionOrphan {
		var err error
		if booting, err = r.booting(ctx, ng); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(owned) > 0 || booting > 0 {
		msg := fmt.Sprintf("The NodeGroup is deleted once its %d nodes are drained and removed (deletionPolicy %s)", len(owned), v1alpha1.DeletionDrain)
		if booting > 0 {
			msg = fmt.Sprintf("The NodeGroup is deleted once its %d nodes, and the nodes of its %d machines still booting, are drained and removed (deletionPolicy %s)",
				len(owned), booting, v1alpha1.DeletionDrain)
		}
		if r.lastDeleting[ng.Name] != msg {
			r.lastDeleting[ng.Name] = msg
			r.Recorder.Eventf(ng, nil, corev1.EventTypeNormal, ReasonDrainingNodes, "Delete", "%s", msg)
		}
		return reconcile.Result{RequeueAfter: finalizeAfter}, nil
	}
	patch := client.MergeFromWithOptions(ng.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(ng, v1alpha1.FinalizerNodes)
	if err := r.Client.Patch(ctx, ng, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing the finalizer of %s: %w", ng.Name, err))
	}
	delete(r.lastDeleting, ng.Name)
	log.FromContext(ctx).Info("node group deleted", "nodeGroup", ng.Name, "deletionPolicy", ng.Spec.DeletionPolicy)
	return reconcile.Result{}, nil
}

// booting counts the machines berth launched for a group being deleted
// with deletionPolicy Drain whose nodes are not the group's yet (a
// Cluster API Machine still booting at the deletion, or whose Node is
// not adopted yet): the group waits for them, as left they and the
// replicas berth added for them would be no one's. A machine is waited
// for at most the max provision time from its launch. A group whose
// provider is not enabled waits for none (none of its machines can be
// seen, none of its nodes removed); one whose machines cannot be listed
// waits, retrying, for up to the max provision time from its deletion,
// then goes, saying so.
func (r *Reconciler) booting(ctx context.Context, ng *v1alpha1.NodeGroup) (int, error) {
	if r.Unadopted == nil {
		return 0, nil
	}
	names, err := r.Unadopted.Unadopted(ctx, ng, r.maxProvisionTime())
	switch {
	case errors.Is(err, cloudprovider.ErrNotEnabled):
		return 0, nil
	case err != nil && ng.DeletionTimestamp != nil && r.Clock.Since(ng.DeletionTimestamp.Time) > r.maxProvisionTime():
		r.Recorder.Eventf(ng, nil, corev1.EventTypeWarning, ReasonUnadoptedUnknown, "Delete",
			"For %s since its deletion, the machines launched for node group %s that may still be booting could not be listed (%v); it goes without waiting for them",
			r.maxProvisionTime(), ng.Name, err)
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("listing the machines launched for %s still booting: %w", ng.Name, err)
	}
	return len(names), nil
}

// cancelRemoval undoes the removal the provider may hold half-done for
// the node (nothing when it holds none, or when there is no provider).
func (r *Reconciler) cancelRemoval(ctx context.Context, n *corev1.Node) error {
	if r.Removals == nil {
		return nil
	}
	err := r.Removals.CancelRemoval(ctx, n.Name)
	if err != nil && !cloudprovider.IsRemovalCommitted(err) {
		return fmt.Errorf("undoing the provider's removal of node %s before orphaning it: %w", n.Name, err)
	}
	return err
}

// orphan takes berth's marks off a node of a deleted group: its owner mark
// (no berth controller removes it any more), any drain in progress, and
// the standby tier's marks (a standby node becomes an ordinary node; a
// suspended one stays suspended, berth.dev/suspended-at says so).
func (r *Reconciler) orphan(ctx context.Context, ng *v1alpha1.NodeGroup, n *corev1.Node) error {
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(n.Annotations, v1alpha1.AnnotationLaunchedBy)
	nodeutil.StopDrain(n)
	nodeutil.LeaveStandby(n)
	if err := r.Client.Patch(ctx, n, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("orphaning node %s: %w", n.Name, err))
	}
	r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonOrphaned, "Delete",
		"Node group %s was deleted with deletionPolicy %s: the node stays and is no longer berth's to remove", ng.Name, v1alpha1.DeletionOrphan)
	return nil
}
