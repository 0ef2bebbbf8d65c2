package provisioning

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// Booting is what a round makes of the instances a provider is still
// launching (cloudprovider.Pending: a Cluster API Machine whose Node has
// not registered): the nodes the planner assumes them to be, and the
// instances the provisioner acts on.
type Booting struct {
	// Nodes are the launching nodes, with room kept for the DaemonSets
	// that will run there (syntheticNode), and the instances that never
	// registered a Node, cordoned (they take no pod and still count
	// against their group's limits).
	Nodes []*corev1.Node
	// GivenUp names the instances the provider gave up on.
	GivenUp []string
	// Stuck are the instances that never registered a Node within the max
	// provision time (neverRegistered), each with its group.
	Stuck []Stuck
}

// Stuck is an instance that never registered its Node, and its group.
type Stuck struct {
	Group    *v1alpha1.NodeGroup
	Instance *cloudprovider.Instance
}

// BootingOf sorts the launching instances of each group (pending, by
// group name) as a round sees them at now: an instance whose Node
// registered (under its name or provider ID) is planned as that Node;
// one given up is dropped; one with infrastructure but no Node for longer
// than maxProvisionTime (0: no bound) is stuck; the others are booting.
// Pure: the controller and `berth explain` read the same nodes from it.
func BootingOf(groups []*v1alpha1.NodeGroup, pending map[string][]*cloudprovider.Instance, nodes []*corev1.Node,
	dss []daemonset.Pod, now time.Time, maxProvisionTime time.Duration) Booting {
	var out Booting
	if len(pending) == 0 {
		return out
	}
	// A Node registered under the instance's name or provider ID: the
	// provider's record of its launch may lag (a Machine's nodeRef), and its
	// Node may be named by the cloud, not after the Machine.
	have := make(map[string]bool, 2*len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
		if n.Spec.ProviderID != "" {
			have[cloudprovider.NormalizeProviderID(n.Spec.ProviderID)] = true
		}
	}
	// An instance two groups list (two groups naming one Cluster API
	// object, which its provider holds) is the first group's: the same
	// node twice would fail the round for every group.
	listed := map[string]bool{}
	for _, ng := range groups {
		for _, inst := range pending[ng.Name] {
			if listed[inst.NodeName] {
				continue
			}
			listed[inst.NodeName] = true
			switch {
			case inst.GivenUp:
				out.GivenUp = append(out.GivenUp, inst.NodeName)
			case have[inst.NodeName] || inst.ProviderID != "" && have[cloudprovider.NormalizeProviderID(inst.ProviderID)]:
				// registered: the Node is planned as it is
			case neverRegistered(inst, now, maxProvisionTime):
				out.Stuck = append(out.Stuck, Stuck{Group: ng, Instance: inst})
				if n := unregisteredNode(ng, inst); n != nil {
					out.Nodes = append(out.Nodes, n)
				}
			default:
				if n := syntheticNode(ng, inst, dss); n != nil {
					out.Nodes = append(out.Nodes, n)
				}
			}
		}
	}
	return out
}

// neverRegistered reports whether a launching instance that has its
// infrastructure (a provider ID) is older than maxProvisionTime without a
// Node (a Cluster API Machine whose kubelet never joined): it no longer
// counts as capacity, and the pods planned on it are planned again. One
// still waiting for infrastructure is the provider's to give up (GivenUp,
// after its machine timeout).
func neverRegistered(inst *cloudprovider.Instance, now time.Time, maxProvisionTime time.Duration) bool {
	return inst.ProviderID != "" && maxProvisionTime > 0 && !inst.CreatedAt.IsZero() && now.Sub(inst.CreatedAt) > maxProvisionTime
}

// unregisteredNode is a launched instance that never registered its Node
// as the planner sees it: a node of its group that takes no pod
// (cordoned) and still counts against the group's maxSize and limits, as
// the machine is still there and billed.
func unregisteredNode(ng *v1alpha1.NodeGroup, inst *cloudprovider.Instance) *corev1.Node {
	n := cloudprovider.NodeFor(ng, inst.Offering, inst.NodeName)
	if n == nil {
		return nil
	}
	n.CreationTimestamp = metav1.NewTime(inst.CreatedAt)
	n.Spec.Unschedulable = true
	return n
}

// lastListed are the launching instances of each node group as the last
// round that could list them saw them, and when: a round that cannot list
// a group's instances counts those (fill), for up to the max provision
// time, instead of counting none. Machines booting there are still
// billed and still count against the group's and the cluster's limits;
// counted as none, other groups would launch past --max-nodes-total.
// Rounds run one at a time.
type lastListed map[string]listedInstances

type listedInstances struct {
	instances []*cloudprovider.Instance
	at        time.Time
}

// fill records the instances of the groups listed this round (pending)
// and returns pending with, for each group unlisted, the instances its
// last listing showed when that was at most maxProvisionTime ago
// (inflightTTL when that is not set). Groups no longer given are
// forgotten.
func (l lastListed) fill(groups []*v1alpha1.NodeGroup, pending map[string][]*cloudprovider.Instance, unlisted map[string]bool,
	now time.Time, maxProvisionTime time.Duration) map[string][]*cloudprovider.Instance {
	keep := maxProvisionTime
	if keep <= 0 {
		keep = inflightTTL
	}
	given := make(map[string]bool, len(groups))
	for _, ng := range groups {
		name := ng.Name
		given[name] = true
		last, ok := l[name]
		switch {
		case !unlisted[name] && len(pending[name]) > 0:
			l[name] = listedInstances{instances: pending[name], at: now}
		case !unlisted[name]:
			delete(l, name)
		case ok && now.Sub(last.at) <= keep:
			if pending == nil {
				pending = map[string][]*cloudprovider.Instance{}
			}
			pending[name] = last.instances
		}
	}
	for name := range l {
		if !given[name] {
			delete(l, name)
		}
	}
	return pending
}
