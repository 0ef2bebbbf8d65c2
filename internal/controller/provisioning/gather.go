package provisioning

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/draread"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// read reads the cluster from the cache into a new round: node groups,
// nodes, pods and what the planner needs besides. It changes nothing.
func (p *Provisioner) read(ctx context.Context) (*round, []corev1.Pod, error) {
	r := &round{now: p.Clock.Now()}
	in := &r.in
	ngs := &v1alpha1.NodeGroupList{}
	if err := p.Client.List(ctx, ngs); err != nil {
		return nil, nil, fmt.Errorf("listing node groups: %w", err)
	}
	groups := map[string]*v1alpha1.NodeGroup{}
	for i := range ngs.Items {
		if ngs.Items[i].DeletionTimestamp == nil {
			groups[ngs.Items[i].Name] = &ngs.Items[i]
			in.NodeGroups = append(in.NodeGroups, &ngs.Items[i])
		}
	}
	r.groups = groups
	for name, err := range cloudprovider.Refresh(ctx, p.Cloud, in.NodeGroups) {
		log.FromContext(ctx).Info("planning with the node group's spec: its provider could not refresh it", "nodeGroup", name, "error", err.Error())
		p.Recorder.Eventf(groups[name], nil, corev1.EventTypeWarning, ReasonProviderRefreshFailed, "Refresh",
			"Planning with the NodeGroup's spec: %v", err)
	}
	nodes := &corev1.NodeList{}
	if err := p.Client.List(ctx, nodes); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	in.Nodes = append(in.Nodes, p.pendingNodes(ctx, in.NodeGroups, in.Nodes)...)
	pods := &corev1.PodList{}
	if err := p.Client.List(ctx, pods); err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	if err := p.gatherRest(ctx, in); err != nil {
		return nil, nil, err
	}
	in.ClusterLimits = p.opts.ClusterLimits
	in.Now, in.LaunchGrace = r.now, p.opts.MaxProvisionTime
	return r, pods.Items, nil
}

// gatherRest reads what the planner needs besides nodes and pods.
func (p *Provisioner) gatherRest(ctx context.Context, in *scaleup.Input) error {
	dss := &appsv1.DaemonSetList{}
	if err := p.Client.List(ctx, dss); err != nil {
		return fmt.Errorf("listing daemonsets: %w", err)
	}
	for i := range dss.Items {
		in.DaemonSets = append(in.DaemonSets, &dss.Items[i])
	}
	nss := &corev1.NamespaceList{}
	if err := p.Client.List(ctx, nss); err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := p.Client.List(ctx, pvcs); err != nil {
		return fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	for i := range pvcs.Items {
		in.Claims = append(in.Claims, &pvcs.Items[i])
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := p.Client.List(ctx, pvs); err != nil {
		return fmt.Errorf("listing persistentvolumes: %w", err)
	}
	for i := range pvs.Items {
		in.Volumes = append(in.Volumes, &pvs.Items[i])
	}
	dra, err := draread.List(ctx, p.Client)
	if err != nil {
		return err
	}
	in.DRA = dra
	return nil
}

// pendingNodes are the launching nodes of instances the provider launched
// whose Node has not registered yet (a Cluster API Machine booting), as
// the planner assumes them, so that a slow boot is not launched again.
func (p *Provisioner) pendingNodes(ctx context.Context, groups []*v1alpha1.NodeGroup, nodes []*corev1.Node) []*corev1.Node {
	pending, failed := cloudprovider.Pending(ctx, p.Cloud, groups)
	for name, err := range failed {
		log.FromContext(ctx).Info("could not list the node group's launching instances; planning without them", "nodeGroup", name, "error", err.Error())
	}
	if len(pending) == 0 {
		return nil
	}
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
	}
	var out []*corev1.Node
	for _, ng := range groups {
		for _, inst := range pending[ng.Name] {
			if inst.GivenUp {
				p.inflight.forget(inst.NodeName)
				continue
			}
			if !have[inst.NodeName] {
				if n := syntheticNode(ng, inst); n != nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
