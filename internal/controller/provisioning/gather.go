package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// read reads the cluster from the cache into a new round: node groups
// (not those being deleted: no node is launched for them), nodes, pods and
// what the planner needs besides. It changes nothing in the cluster; it
// marks the offering of a launched instance that never registered its
// Node unavailable (unregistered).
func (p *Provisioner) read(ctx context.Context) (*round, []*corev1.Pod, error) {
	var changes *snapshot.PodChanges
	var indexed clusterread.Indexed
	ok := false
	if p.podChanges != nil {
		// The pods sorted as the informer's events came, and the changes
		// read from the same index: a round looks only at the pods
		// without a node.
		if indexed, ok = p.podChanges.TakeIndexed(); ok {
			changes = indexed.Changes
		} else {
			changes = p.podChanges.Take() // before the pods are read: they are then as new as the changes
		}
	}
	cl, err := clusterread.Read(ctx, p.Client, clusterread.Parts{SharedNodes: true, Informers: p.informers, NoPods: ok,
		DaemonSetPods: indexed.DaemonSetPods})
	if err != nil {
		return nil, nil, err
	}
	r := &round{now: p.Clock.Now(), groups: map[string]*v1alpha1.NodeGroup{}}
	pods := cl.Pods
	if ok {
		r.in.Pods, pods = indexed.Bound, indexed.Unbound
	}
	in := &r.in
	in.NodeGroups = cl.Active()
	for _, g := range in.NodeGroups {
		r.groups[g.Name] = g
	}
	for name, err := range cloudprovider.Refresh(ctx, p.Cloud, in.NodeGroups) {
		log.FromContext(ctx).Info("planning with the node group's spec: its provider could not refresh it", "nodeGroup", name, "error", err.Error())
		p.Recorder.Eventf(r.groups[name], nil, corev1.EventTypeWarning, ReasonProviderRefreshFailed, "Refresh",
			"Planning with the NodeGroup's spec: %v", err)
	}
	launching, unlisted := p.pendingNodes(ctx, in.NodeGroups, cl.Nodes, daemonset.Pods(cl.DaemonSets))
	in.Nodes, r.unlisted = append(cl.Nodes, launching...), unlisted
	in.DaemonSets, in.Namespaces, in.Claims, in.Volumes, in.DRA = cl.DaemonSets, cl.Namespaces, cl.Claims, cl.Volumes, cl.DRA
	in.Limits = p.opts.Limits
	in.Now, in.LaunchGrace = r.now, p.opts.MaxProvisionTime
	in.Base, in.Changes, in.Options = p.base, changes, p.options
	return r, pods, nil
}

// pendingNodes are the launching nodes of instances the provider launched
// whose Node has not registered yet (a Cluster API Machine booting), as
// the planner assumes them, so that a slow boot is not launched again;
// and the groups whose launching instances could not be listed: the
// round launches nothing there (its instances booting would look gone,
// and be launched again), and counts the instances the last listing
// showed there (lastListed), so that they still count against the
// limits.
func (p *Provisioner) pendingNodes(ctx context.Context, groups []*v1alpha1.NodeGroup, nodes []*corev1.Node, dss []daemonset.Pod) ([]*corev1.Node, map[string]bool) {
	pending, failed := cloudprovider.Pending(ctx, p.Cloud, groups)
	var unlisted map[string]bool
	for _, ng := range groups {
		err, ok := failed[ng.Name]
		if !ok {
			continue
		}
		log.FromContext(ctx).Info("could not list the node group's launching instances; launching nothing there this round", "nodeGroup", ng.Name, "error", err.Error())
		p.Recorder.Eventf(ng, nil, corev1.EventTypeWarning, ReasonProviderListFailed, "Plan",
			"Launching nothing in this node group this round: its launching instances could not be listed (%v)", err)
		if unlisted == nil {
			unlisted = map[string]bool{}
		}
		unlisted[ng.Name] = true
	}
	pending = p.listed.fill(groups, pending, unlisted, p.Clock.Now(), p.opts.MaxProvisionTime)
	booting := BootingOf(groups, pending, nodes, dss, p.Clock.Now(), p.opts.MaxProvisionTime)
	for _, name := range booting.GivenUp {
		p.inflight.forget(name)
	}
	stuck := make(map[string]bool, len(booting.Stuck))
	for _, s := range booting.Stuck {
		p.inflight.forget(s.Instance.NodeName)
		stuck[s.Instance.NodeName] = true
		p.avoidUnregistered(ctx, s.Group, s.Instance)
	}
	if len(unlisted) == 0 { // a group not listed may hold a machine marked already
		for name := range p.unjoined {
			if !stuck[name] {
				delete(p.unjoined, name) // gone, or registered at last
			}
		}
	}
	return booting.Nodes, unlisted
}

// avoidUnregistered avoids the offering of a launched instance that
// never registered its Node (BootingOf's Stuck), once per instance, as a
// launch that failed: launched again there, the next machine would likely
// hang the same way. The instance itself is left to the provider (a
// Cluster API MachineHealthCheck).
func (p *Provisioner) avoidUnregistered(ctx context.Context, ng *v1alpha1.NodeGroup, inst *cloudprovider.Instance) {
	if p.unjoined[inst.NodeName] {
		return
	}
	p.unjoined[inst.NodeName] = true
	msg := fmt.Sprintf("instance %s (%s) has not registered a Node within the max provision time (%s)", inst.NodeName, inst.ProviderID, p.opts.MaxProvisionTime)
	log.FromContext(ctx).Info("a launched instance never registered its Node; avoiding its offering", "nodeGroup", ng.Name, "instance", inst.NodeName,
		"providerID", inst.ProviderID, "instanceType", inst.Offering.InstanceType, "zone", inst.Offering.Zone)
	p.Offerings.MarkLaunchFailed(v1alpha1.OfferingKey{NodeGroup: ng.Name, InstanceType: inst.Offering.InstanceType, Zone: inst.Offering.Zone,
		CapacityType: string(inst.Offering.CapacityType)}, msg, inst.CreatedAt)
}
