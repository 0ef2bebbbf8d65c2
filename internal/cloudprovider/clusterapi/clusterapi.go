// Package clusterapi is the cloud provider for Cluster API: a node group is
// a MachineDeployment, MachineSet or MachinePool in a management cluster.
// berth grows it through the scale subresource, and removes one chosen node
// by marking its Machine with cluster.x-k8s.io/delete-machine before it
// lowers replicas, so that Cluster API deletes exactly that Machine.
//
// Objects are read as unstructured objects and scaled through the scale
// subresource, so berth does not depend on Cluster API's Go module (whose
// Kubernetes and controller-runtime versions move on their own schedule)
// and works with any Cluster API version serving the chosen apiVersion.
package clusterapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// Name of the provider.
const Name = "clusterAPI"

// Provider scales Cluster API objects.
type Provider struct {
	// cluster reads Nodes and NodeGroups of the cluster berth scales.
	cluster client.Reader
	// mgmt reads Machines and scales objects in the management cluster
	// (which may be the same cluster). It must not be a cached client: a
	// scale decision must see the Machines as they are.
	mgmt  client.Client
	clock clock.PassiveClock
	// MachineWait is how long Create waits for the Machine its new
	// replica makes (the MachineSet controller creates it within about a
	// second), to name the launch after it. Zero means 5 s; negative, no
	// wait (the launch is then named by a placeholder).
	MachineWait time.Duration

	mu sync.Mutex
	// claimed are Machines a Create already named its launch after, so
	// that parallel launches of one group name different Machines.
	claimed map[types.UID]time.Time
	// said is the last thing logged under a key (sayOnce): why a group's
	// infrastructure template could not be read whole, which of its
	// annotations were ignored.
	said map[string]string
	// infraCache is what each infrastructure template said, and when
	// (infraStatus).
	infraCache map[infraKey]infraCached
	// ahead is since when each object has had more replicas than live
	// Machines (unrealized).
	ahead map[objectKey]time.Time
	// objectLocks serialise berth's removals of each object (lockObject).
	objectLocks map[objectKey]*sync.Mutex
	// unmatched are berth's launches whose Machine did not show within
	// MachineWait, per object: Pending marks such a Machine as berth's
	// when it shows (stampLate).
	unmatched map[objectKey][]lateLaunch
}

var (
	_ cloudprovider.CloudProvider      = (*Provider)(nil)
	_ cloudprovider.NodeGroupRefresher = (*Provider)(nil)
	_ cloudprovider.RemovalCanceler    = (*Provider)(nil)
)

// New returns a Cluster API provider. cluster reads the workload cluster
// (Nodes, NodeGroups); mgmt is an uncached client of the management cluster.
func New(cluster client.Reader, mgmt client.Client, clk clock.PassiveClock) *Provider {
	return &Provider{cluster: cluster, mgmt: mgmt, clock: clk, claimed: map[types.UID]time.Time{}, said: map[string]string{}, infraCache: map[infraKey]infraCached{}, ahead: map[objectKey]time.Time{}, objectLocks: map[objectKey]*sync.Mutex{}, unmatched: map[objectKey][]lateLaunch{}}
}

// Name returns "clusterAPI".
func (p *Provider) Name() string { return Name }

// Create adds one replica and names the launch after the Machine it makes
// (or a placeholder if the Machine does not show within MachineWait). A
// Machine of the group that has had no infrastructure for longer than the
// group's machine timeout makes the launch fail with InsufficientCapacity
// after berth removed that Machine (marked, then replicas lowered; one per
// launch), so berth falls back to other groups.
func (p *Provider) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	ng := req.NodeGroup
	r, err := refOf(ng)
	if err != nil {
		return nil, err
	}
	if ng.UID == "" {
		return nil, fmt.Errorf("node group %s has no UID (not read from the API server)", ng.Name)
	}
	obj := r.object()
	if err := p.mgmt.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, fmt.Errorf("reading %s: %w", r, err)
	}
	if why := unscalable(obj); why != "" {
		return nil, fmt.Errorf("%s: %s; not scaling it", r, why)
	}
	if why, err := p.shadowed(ctx, ng, r); err != nil {
		return nil, err
	} else if why != "" {
		return nil, errors.New(why)
	}
	tmpl, err := ParseAnnotations(obj.GetAnnotations())
	if err != nil {
		return nil, fmt.Errorf("%s has malformed autoscaler annotations, not scaling it: %w", r, err)
	}
	if tmpl.MachineTimeout != nil { // the group may come unrefreshed (a standby launch): Apply's rule
		applied := ng.DeepCopy()
		tmpl.Apply(applied)
		if r, err = refOf(applied); err != nil {
			return nil, err
		}
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return nil, err
	}
	if bad := stuck(ms, p.clock.Now(), r.timeout); len(bad) > 0 {
		if err := p.remove(ctx, r, ng, bad[0]); err != nil {
			return nil, fmt.Errorf("removing machine %s/%s that will get no Node: %w", bad[0].Namespace, bad[0].Name, err)
		}
		why := fmt.Sprintf("got no infrastructure (provider ID) within %s", r.timeout)
		if bad[0].Failure != "" {
			why = "failed: " + bad[0].Failure
		}
		return nil, &cloudprovider.InsufficientCapacityError{Offering: req.Offering, Message: fmt.Sprintf(
			"machine %s/%s of %s %s; berth removed it", bad[0].Namespace, bad[0].Name, r, why)}
	}
	if why := p.unrealized(r, obj, ms); why != "" {
		return nil, &cloudprovider.InsufficientCapacityError{Offering: req.Offering, Message: why}
	}
	limit := ng.Spec.MaxSize
	if tmpl.MaxSize != nil && *tmpl.MaxSize < limit {
		limit = *tmpl.MaxSize
	}
	if err := p.addReplica(ctx, r, ng.Name, limit); err != nil {
		return nil, err
	}
	inst := &cloudprovider.Instance{NodeName: ng.Name + "-" + randomSuffix(), NodeGroup: ng.Name, Offering: req.Offering, CreatedAt: p.clock.Now()}
	if m, ok := p.awaitNewMachine(ctx, r, machineNames(ms)); ok {
		// Named after its Machine, the launch is the same launching node
		// that Pending reports in later rounds.
		inst.NodeName = m.Name
		p.stampLaunch(ctx, ng, m)
	} else {
		now := p.clock.Now()
		p.mu.Lock()
		p.forgetLateLaunches(now)
		p.unmatched[r.key()] = append(p.unmatched[r.key()], newLateLaunch(ms, now))
		p.mu.Unlock()
	}
	return inst, nil
}

// Delete removes the Machine behind the node: it marks the Machine with
// cluster.x-k8s.io/delete-machine (and berth's own mark), then lowers the
// replicas by the number of live Machines berth marked. Both steps are
// idempotent, so a restart between them repeats neither. Only a node that
// carries its node group's owner mark and whose Machine belongs to the
// group's Cluster API object is touched.
func (p *Provider) Delete(ctx context.Context, nodeName string) error {
	node, ng, r, err := p.nodeAndGroup(ctx, nodeName)
	if err != nil {
		return err
	}
	if mark := node.Annotations[v1alpha1.AnnotationLaunchedBy]; mark == "" || mark != string(ng.UID) {
		return fmt.Errorf("node %s does not carry node group %s's owner mark: berth does not remove it", nodeName, ng.Name)
	}
	if why, err := p.shadowed(ctx, ng, r); err != nil {
		return err
	} else if why != "" {
		return fmt.Errorf("not removing node %s: %s", nodeName, why)
	}
	obj := r.object()
	if err := p.mgmt.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return fmt.Errorf("reading %s: %w", r, err)
	}
	if why := unscalable(obj); why != "" {
		return fmt.Errorf("%s: %s; not removing node %s", r, why, nodeName)
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return err
	}
	m, ok := machineForProviderID(ms, node.Spec.ProviderID)
	if !ok {
		return &cloudprovider.NotFoundError{Name: nodeName}
	}
	return p.remove(ctx, r, ng, m)
}

// Get returns the instance behind a node of a clusterAPI node group.
func (p *Provider) Get(ctx context.Context, nodeName string) (*cloudprovider.Instance, error) {
	node, ng, r, err := p.nodeAndGroup(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return nil, err
	}
	m, ok := machineForProviderID(ms, node.Spec.ProviderID)
	if !ok || m.Deleting {
		return nil, &cloudprovider.NotFoundError{Name: nodeName}
	}
	inst := instance(ng, m)
	inst.NodeName = node.Name
	inst.NotLaunched = m.Annotations[v1alpha1.AnnotationLaunchedBy] != string(ng.UID)
	return inst, nil
}

// List returns the live Machines of a node group's object. A Machine whose
// Node has not registered yet is named by the Machine.
func (p *Provider) List(ctx context.Context, nodeGroup string) ([]*cloudprovider.Instance, error) {
	ng := &v1alpha1.NodeGroup{}
	if err := p.cluster.Get(ctx, client.ObjectKey{Name: nodeGroup}, ng); err != nil {
		return nil, fmt.Errorf("reading node group %s: %w", nodeGroup, err)
	}
	if ng.Spec.Provider.ClusterAPI == nil {
		return nil, nil
	}
	r, err := refOf(ng)
	if err != nil {
		return nil, err
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return nil, err
	}
	var out []*cloudprovider.Instance
	for _, m := range ms {
		if !m.Deleting {
			out = append(out, instance(ng, m))
		}
	}
	return out, nil
}

// RefreshNodeGroup applies the group's object's autoscaler annotations
// (size bounds, capacity, labels, taints) to ng, a copy the caller plans
// with, and what its infrastructure template reports of its machines where
// they say nothing (infraStatus); an object berth does not scale
// (unscalable) holds the group at its replicas.
func (p *Provider) RefreshNodeGroup(ctx context.Context, ng *v1alpha1.NodeGroup) error {
	if ng.Spec.Provider.ClusterAPI == nil {
		return nil
	}
	r, err := refOf(ng)
	if err != nil {
		return err
	}
	obj := r.object()
	if err := p.mgmt.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return fmt.Errorf("reading %s: %w", r, err)
	}
	tmpl, err := ParseAnnotations(obj.GetAnnotations())
	if err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	var ignored error
	if len(tmpl.Ignored) > 0 {
		ignored = errors.New(strings.Join(tmpl.Ignored, "; "))
	}
	p.sayOnce(ctx, "annotations/"+ng.Name, ng.Name, ignored, "ignoring autoscaler annotations that cannot be read, as Cluster Autoscaler does")
	tmpl.withManagedLabels(obj.Object)
	tmpl.withInfraStatus(p.infraStatus(ctx, ng.Name, obj))
	tmpl.Apply(ng)
	if unscalable(obj) != "" {
		hold(ng, obj)
		return nil
	}
	why, err := p.shadowed(ctx, ng, r)
	if err != nil {
		return err
	}
	p.sayOnce(ctx, "shadowed/"+ng.Name, ng.Name, errorOrNil(why), "the node group scales nothing")
	if why != "" {
		return p.holdAtNodes(ctx, ng)
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return err
	}
	p.observeAhead(r, obj, ms) // each round: a launch sees how long the replicas have been ahead
	if why := removalsRefused(r, ms); why != "" {
		live := 0 // as the planner counts them: not Machines given up
		for _, m := range ms {
			if !m.Deleting && !givenUp(m, p.clock.Now(), r.timeout) {
				live++
			}
		}
		holdRemovals(ng, obj, live)
		p.sayOnce(ctx, "removals/"+ng.Name, ng.Name, errors.New(why), "no node of the group is removed for now")
	} else {
		p.sayOnce(ctx, "removals/"+ng.Name, ng.Name, nil, "")
	}
	return nil
}

// removalsRefused says why Delete would refuse every removal in the
// group now ("" when it would not): a MachineDeployment rolling out
// (live Machines in more than one MachineSet), or a live Machine marked
// for deletion by someone else. The group is then planned without
// removals (holdRemovals), so that no node is drained for a removal that
// cannot happen.
func removalsRefused(r ref, ms []machine) string {
	if r.kind == v1alpha1.ClusterAPIMachineDeployment {
		if sets := machineSets(ms); len(sets) > 1 {
			return fmt.Sprintf("%s is rolling out (live Machines in MachineSets %v)", r, sets)
		}
	}
	for _, m := range ms {
		if !m.Deleting && !m.markedByBerth() && m.markedForDeletion() {
			return fmt.Sprintf("machine %s/%s carries %s not set by berth", m.Namespace, m.Name, AnnotationDeleteMachine)
		}
	}
	return ""
}

// nodeAndGroup reads a node and its clusterAPI node group.
func (p *Provider) nodeAndGroup(ctx context.Context, nodeName string) (*corev1.Node, *v1alpha1.NodeGroup, ref, error) {
	node := &corev1.Node{}
	if err := p.cluster.Get(ctx, client.ObjectKey{Name: nodeName}, node); apierrors.IsNotFound(err) {
		return nil, nil, ref{}, &cloudprovider.NotFoundError{Name: nodeName}
	} else if err != nil {
		return nil, nil, ref{}, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	group := node.Labels[v1alpha1.LabelNodeGroup]
	ng := &v1alpha1.NodeGroup{}
	if err := p.cluster.Get(ctx, client.ObjectKey{Name: group}, ng); apierrors.IsNotFound(err) || group == "" {
		return nil, nil, ref{}, &cloudprovider.NotFoundError{Name: nodeName}
	} else if err != nil {
		return nil, nil, ref{}, fmt.Errorf("reading node group %s: %w", group, err)
	}
	if ng.Spec.Provider.ClusterAPI == nil {
		return nil, nil, ref{}, &cloudprovider.NotFoundError{Name: nodeName}
	}
	r, err := refOf(ng)
	return node, ng, r, err
}

// instance describes a Machine of a group. A clusterAPI group has one
// offering (enforced by the API).
func instance(ng *v1alpha1.NodeGroup, m machine) *cloudprovider.Instance {
	name := m.NodeName
	if name == "" {
		name = m.Name
	}
	inst := &cloudprovider.Instance{NodeName: name, ProviderID: m.ProviderID, NodeGroup: ng.Name, CreatedAt: m.Created}
	if it := ng.Spec.InstanceTypes; len(it) > 0 && len(it[0].Offerings) > 0 {
		inst.Offering = cloudprovider.Offering{InstanceType: it[0].Name, Zone: it[0].Offerings[0].Zone, CapacityType: it[0].Offerings[0].CapacityType}
	}
	return inst
}

// randomSuffix returns 5 lowercase letters and digits.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// errorOrNil is why as an error, nil when empty.
func errorOrNil(why string) error {
	if why == "" {
		return nil
	}
	return errors.New(why)
}

// stampLaunch marks the Machine a launch of berth's made with the group's
// UID (berth.dev/launched-by, as its node carries it): of the Machines
// of an object, only those are berth's launches, which the launch timeout
// may remove when their node never turns Ready (Get's NotLaunched). A
// Machine the stamp could not be written on is left to Cluster API's own
// remediation, as any Machine berth did not launch.
func (p *Provider) stampLaunch(ctx context.Context, ng *v1alpha1.NodeGroup, m machine) {
	patch := client.MergeFrom(m.obj.DeepCopy())
	a := m.obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.AnnotationLaunchedBy] = string(ng.UID)
	m.obj.SetAnnotations(a)
	if err := p.mgmt.Patch(ctx, m.obj, patch); err != nil {
		log.FromContext(ctx).Info("could not mark the Machine of a launch as berth's: the launch timeout leaves it to Cluster API",
			"machine", m.Namespace+"/"+m.Name, "nodeGroup", ng.Name, "error", err.Error())
	}
}
