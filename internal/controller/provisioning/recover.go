package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// recoverState rebuilds, when this replica starts leading, what a previous
// leader kept in memory, from the cluster:
//   - offerings it was avoiding after failed launches (NodeGroup status
//     unavailableOfferings), so a broken offering is not retried at once;
//   - instances the cloud provider has launched whose Node has not
//     registered yet (provider List), so they are not launched again; a
//     group whose instances the provider cannot list is left out of the
//     rounds until it can (recoverGroups), and stops no other group;
//   - the nominations of pods waiting on nodes of berth's groups, so that
//     it restores them when the scheduler clears them while the node
//     boots, and plans such a pod again once the node is up and the pod
//     still waits (a nomination it does not know would hold the pod's
//     room there for ever).
func (p *Provisioner) recoverState(ctx context.Context) error {
	groups := &v1alpha1.NodeGroupList{}
	if err := p.Client.List(ctx, groups); err != nil {
		return fmt.Errorf("listing node groups: %w", err)
	}
	restored, launching, nominated := 0, 0, 0
	for i := range groups.Items {
		ng := &groups.Items[i]
		restored += p.Offerings.RestoreStatus(ng)
		n, err := p.recoverInstances(ctx, ng)
		if err != nil {
			return err
		}
		launching += n
	}
	pods := &corev1.PodList{}
	if err := p.Client.List(ctx, pods); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName == "" {
			continue
		}
		node := &corev1.Node{}
		if err := p.Client.Get(ctx, client.ObjectKey{Name: pod.Status.NominatedNodeName}, node); err != nil {
			continue // preemption's nomination to a node that is gone, or not ours
		}
		// A nomination to a node of berth's groups is taken for berth's: it
		// keeps its grace (nominationGrace once the node is schedulable)
		// and is planned again after it. Held for ever instead, a pod whose
		// node filled up while no leader watched would never get a node.
		if node.Labels[v1alpha1.LabelNodeGroup] != "" {
			p.nominated.set(client.ObjectKeyFromObject(pod), node.Name, node.Labels[v1alpha1.LabelNodeGroup])
			nominated++
		}
	}
	log.FromContext(ctx).Info("recovered state from the cluster", "unavailableOfferings", restored, "launchingInstances", launching, "nominations", nominated,
		"unlistedNodeGroups", len(p.unrecovered))
	return nil
}

// recoverInstances adds to the nodes in flight the group's instances
// whose Node has not registered yet, and returns how many. When the
// provider cannot list them (a Cluster API group without --clusterapi,
// its management cluster down, RBAC missing), the group is recorded as
// unrecovered: the rounds launch nothing in it, since an instance launched
// before this replica led could be launched again, and list it again
// (recoverGroups). An error reading a Node is returned.
func (p *Provisioner) recoverInstances(ctx context.Context, ng *v1alpha1.NodeGroup) (int, error) {
	instances, err := p.Cloud.List(ctx, ng.Name)
	if err != nil {
		if _, known := p.unrecovered[ng.Name]; !known {
			log.FromContext(ctx).Info("could not list the node group's instances; launching nothing in it until its provider can", "nodeGroup", ng.Name, "error", err.Error())
			p.Recorder.Eventf(ng, nil, corev1.EventTypeWarning, ReasonProviderListFailed, "Recover",
				"Could not list the group's instances from its provider: %v; berth launches nothing in this group until it can", err)
		}
		p.unrecovered[ng.Name] = err.Error()
		return 0, nil
	}
	launching := 0
	for _, inst := range instances {
		err := p.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, &corev1.Node{})
		if apierrors.IsNotFound(err) {
			// Without DaemonSet room: a provider that reports it launching
			// gives each round a node with that room (pendingNodes), which
			// takes its place.
			p.inflight.add(syntheticNode(ng, inst, nil))
			launching++
		} else if err != nil {
			return 0, fmt.Errorf("reading node %s: %w", inst.NodeName, err)
		}
	}
	delete(p.unrecovered, ng.Name)
	return launching, nil
}

// recoverGroups lists again, before each round, the instances of the
// groups recoverState could not list; a group the listing succeeds for
// (or that is gone) is planned for again.
func (p *Provisioner) recoverGroups(ctx context.Context) error {
	for name := range p.unrecovered {
		ng := &v1alpha1.NodeGroup{}
		if err := p.Client.Get(ctx, client.ObjectKey{Name: name}, ng); apierrors.IsNotFound(err) {
			delete(p.unrecovered, name)
			continue
		} else if err != nil {
			return fmt.Errorf("reading node group %s: %w", name, err)
		}
		n, err := p.recoverInstances(ctx, ng)
		if err != nil {
			return err
		}
		if _, still := p.unrecovered[name]; !still {
			log.FromContext(ctx).Info("listed the node group's instances; planning for it again", "nodeGroup", name, "launchingInstances", n)
		}
	}
	return nil
}
