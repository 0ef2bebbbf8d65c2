package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// remove deletes one Machine of the object through Cluster API: mark it,
// then lower the replicas. Safe to repeat at any point. It holds the
// object's lock (lockObject).
func (p *Provider) remove(ctx context.Context, r ref, ng *v1alpha1.NodeGroup, m machine) error {
	defer p.lockObject(r)()
	// Read again under the lock: an undo it waited for may have taken
	// the Machine's mark off since the caller read it.
	ms, err := p.machines(ctx, r)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(ms, func(x machine) bool { return x.Name == m.Name && x.Namespace == m.Namespace })
	if i < 0 {
		return nil // gone already
	}
	m = ms[i]
	if m.Deleting {
		return nil // Cluster API is deleting it already
	}
	if !m.markedByBerth() {
		patch := client.MergeFromWithOptions(m.obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		a := m.obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		if _, ok := a[AnnotationDeleteMachine]; ok {
			a[v1alpha1.AnnotationDeleteMachineKept] = "true" // someone else's mark: an undo leaves it
		} else {
			a[AnnotationDeleteMachine] = p.clock.Now().UTC().Format(time.RFC3339)
			delete(a, v1alpha1.AnnotationDeleteMachineKept) // from a mark taken off since: the mark now is berth's
		}
		a[v1alpha1.AnnotationDeleteRequestedBy] = string(ng.UID)
		m.obj.SetAnnotations(a)
		if err := p.mgmt.Patch(ctx, m.obj, patch); err != nil {
			return fmt.Errorf("marking machine %s/%s for deletion: %w", m.Namespace, m.Name, err)
		}
	}
	// A conflict means the replicas or Machines changed meanwhile: compute
	// again from what is there now.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return p.lowerReplicas(ctx, r) })
}

// lowerReplicas sets the object's replicas to what they must be for
// Cluster API to delete exactly the live Machines berth marked, and no
// other: the live Machines not marked, plus the replicas still being
// created. It only ever lowers, so repeating it (after a restart, or
// after the MachineSet already deleted a marked Machine) changes nothing.
// It refuses while a live Machine carries delete-machine without berth's
// mark: the MachineSet might delete that one instead of berth's.
func (p *Provider) lowerReplicas(ctx context.Context, r ref) error {
	ms, err := p.machines(ctx, r)
	if err != nil {
		return err
	}
	scale, replicas, err := p.getScale(ctx, r)
	if err != nil {
		return err
	}
	if r.kind == v1alpha1.ClusterAPIMachineDeployment {
		if sets := machineSets(ms); len(sets) > 1 {
			// The MachineDeployment controller chooses which MachineSet
			// shrinks; the marked Machine is deleted first only within its
			// own MachineSet.
			return fmt.Errorf("%s is rolling out (live Machines in MachineSets %v): berth lowers its replicas only when one MachineSet remains, so that Cluster API deletes the Machine berth marked", r, sets)
		}
	}
	target, err := replicasAfterRemoval(ms, replicas)
	if err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	if target >= replicas {
		return nil
	}
	return p.setScale(ctx, r, scale, target)
}

// replicasAfterRemoval is the replica count that removes exactly the live
// Machines berth marked, given the Machines and the current replicas.
//
// The MachineSet deletes as many Machines as it holds past its replicas,
// counting those being deleted, and picks those being deleted first, then
// the marked ones. Lowering while it has more replicas than live Machines
// (a Machine still to be created, or one being deleted that it will
// replace) would match that difference instead of removing a marked
// Machine: the marked one stays, and the Machine to come is never made.
// So it refuses until the live Machines reach the replicas.
func replicasAfterRemoval(ms []machine, replicas int64) (int64, error) {
	live, marked := int64(0), int64(0)
	for _, m := range ms {
		if m.Deleting {
			continue
		}
		live++
		switch {
		case m.markedByBerth():
			marked++
		case m.markedForDeletion():
			return 0, fmt.Errorf("machine %s/%s carries %s not set by berth; berth does not lower replicas while Cluster API could delete that Machine instead of the one berth chose",
				m.Namespace, m.Name, AnnotationDeleteMachine)
		}
	}
	if replicas > live {
		return 0, &cloudprovider.RemovalWaitingError{Message: fmt.Sprintf(
			"waiting for Cluster API: %d replicas but %d live Machines (one is being created or replaced); berth lowers the replicas once the Machines are there",
			replicas, live)}
	}
	return min(replicas, live-marked), nil
}

// machineSets are the MachineSets of the live Machines, sorted.
func machineSets(ms []machine) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if !m.Deleting && !seen[m.MachineSet] {
			seen[m.MachineSet] = true
			out = append(out, m.MachineSet)
		}
	}
	sort.Strings(out)
	return out
}

// Adopt returns the clusterAPI node group whose object owns the Machine
// behind the node (matched by provider ID), or nil. The caller labels the
// node with the group and its owner mark, as berth's own launches carry
// them, so that the rest of berth (planner, status, scale-down, launch
// timeout) treats it as a node of the group.
func (p *Provider) Adopt(ctx context.Context, node *corev1.Node) (*v1alpha1.NodeGroup, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	groups := &v1alpha1.NodeGroupList{}
	if err := p.cluster.List(ctx, groups); err != nil {
		return nil, fmt.Errorf("listing node groups: %w", err)
	}
	// A group whose Machines cannot be read (an API version the management
	// cluster no longer serves, a namespace berth may not list) keeps no
	// other group from adopting its nodes; it is reported only when no
	// group owns the node.
	var errs []error
	// A group being deleted with deletionPolicy Drain adopts the nodes
	// of the Machines berth launched for it before its deletion (they
	// were booting then), so that scale-down drains and removes them as
	// it does the group's other nodes (the group waits for them,
	// Unadopted); none while a live group names the same object, which
	// adopts them. One deleted with Orphan adopts nothing.
	var live, draining []*v1alpha1.NodeGroup
	for i := range groups.Items {
		switch ng := &groups.Items[i]; {
		case ng.Spec.Provider.ClusterAPI == nil:
		case ng.DeletionTimestamp == nil:
			live = append(live, ng)
		case ng.Spec.DeletionPolicy != v1alpha1.DeletionOrphan:
			draining = append(draining, ng)
		}
	}
	for _, ng := range append(live, draining...) {
		r, err := refOf(ng)
		if err != nil {
			errs = append(errs, fmt.Errorf("node group %s: %w", ng.Name, err))
			continue
		}
		if ng.DeletionTimestamp == nil {
			if first, err := p.scaledBy(ctx, ng, r); err != nil {
				return nil, err
			} else if first != ng.Name {
				continue // another group scales the object: its nodes are that group's
			}
		} else if namedBy(live, r) != "" {
			continue // a live group scales the object: it adopts
		}
		ms, err := p.machines(ctx, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("node group %s: %w", ng.Name, err))
			continue
		}
		if m, ok := machineForProviderID(ms, node.Spec.ProviderID); ok && !m.Deleting && (ng.DeletionTimestamp == nil || launchedFor(m, ng)) {
			return ng, nil
		}
	}
	return nil, errors.Join(errs...)
}

// CancelRemoval takes berth's delete mark off the Machine behind the node
// while the replicas were not lowered for it: the marks left must still
// cover every replica already removed (the live Machines beyond the
// replicas), or Cluster API would delete an unmarked Machine instead. A
// removal that went that far is committed (RemovalCommittedError). It
// holds the object's lock (lockObject).
func (p *Provider) CancelRemoval(ctx context.Context, nodeName string) error {
	node, _, r, err := p.nodeAndGroup(ctx, nodeName)
	if cloudprovider.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	defer p.lockObject(r)()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms, err := p.machines(ctx, r)
		if err != nil {
			return err
		}
		m, ok := machineForProviderID(ms, node.Spec.ProviderID)
		if !ok || !m.markedByBerth() {
			return nil
		}
		if m.Deleting {
			return &cloudprovider.RemovalCommittedError{Name: nodeName, Message: "Cluster API is deleting Machine " + m.Namespace + "/" + m.Name}
		}
		_, replicas, err := p.getScale(ctx, r)
		if err != nil {
			return err
		}
		if !canUnmark(ms, replicas, r.kind) {
			return &cloudprovider.RemovalCommittedError{Name: nodeName, Message: fmt.Sprintf(
				"%s has %d replicas for fewer live Machines: its replicas were lowered for Machine %s/%s", r, replicas, m.Namespace, m.Name)}
		}
		patch := client.MergeFromWithOptions(m.obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		a := m.obj.GetAnnotations()
		if a[v1alpha1.AnnotationDeleteMachineKept] != "true" {
			delete(a, AnnotationDeleteMachine)
		}
		delete(a, v1alpha1.AnnotationDeleteRequestedBy)
		delete(a, v1alpha1.AnnotationDeleteMachineKept)
		m.obj.SetAnnotations(a)
		if err := p.mgmt.Patch(ctx, m.obj, patch); err != nil {
			return fmt.Errorf("taking the delete mark off machine %s/%s: %w", m.Namespace, m.Name, err)
		}
		return nil
	})
}

// canUnmark reports whether one of berth's marks can go without Cluster
// API deleting an unmarked Machine: the marks left still cover the live
// Machines beyond the replicas. While a MachineDeployment rolls out (its
// Machines in several MachineSets, surge included) berth never lowers its
// replicas (lowerReplicas), so a mark there was never acted on.
func canUnmark(ms []machine, replicas int64, kind v1alpha1.ClusterAPIKind) bool {
	if kind == v1alpha1.ClusterAPIMachineDeployment && len(machineSets(ms)) > 1 {
		return true
	}
	live, marked := int64(0), int64(0)
	for _, m := range ms {
		if m.Deleting {
			continue
		}
		live++
		if m.markedByBerth() {
			marked++
		}
	}
	return marked-1 >= live-replicas
}

// Removing names the nodes (or, before they registered, the Machines) of
// the group's live Machines that carry berth's delete mark.
func (p *Provider) Removing(ctx context.Context, ng *v1alpha1.NodeGroup) ([]string, error) {
	if ng.Spec.Provider.ClusterAPI == nil {
		return nil, nil
	}
	r, err := refOf(ng)
	if err != nil {
		return nil, err
	}
	if why, err := p.shadowed(ctx, ng, r); err != nil || why != "" {
		return nil, err // another group's removals
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.markedByBerth() && !m.Deleting {
			out = append(out, instance(ng, m).NodeName)
		}
	}
	return out, nil
}

// lockObject takes the lock of the object's removals and returns its
// release. A removal (mark, then lower the replicas) and the undo of
// another (unmark where the marks left still cover the replicas lowered)
// each read the Machines and the replicas and then write one of them:
// run together, the undo could take a mark off after the removal lowered
// the replicas for it, and Cluster API would delete a Machine berth never
// drained. Each write is guarded by its own object's resourceVersion
// only, so berth's own removals of one object (the disruption
// controller's, the launch timeout's, the standby controller's, a stuck
// Machine's) run one at a time. Launches do not take it: raising the
// replicas only makes an undo safer, and a lowering that raced one
// conflicts on the scale.
func (p *Provider) lockObject(r ref) (unlock func()) {
	p.mu.Lock()
	l, ok := p.objectLocks[r.key()]
	if !ok {
		l = &sync.Mutex{}
		p.objectLocks[r.key()] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}
