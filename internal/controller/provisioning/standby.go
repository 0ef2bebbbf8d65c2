package provisioning

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// resumeRetry is how long a suspended node whose resume failed is not
// offered to the planner again.
const resumeRetry = time.Minute

// offerSuspended shows the planner the suspended standby nodes berth
// launched as nodes it may resume (headroom.Resumable): pods and running
// units fill them before new nodes are planned. It returns the nodes and
// the names of those offered.
func (p *Provisioner) offerSuspended(nodes []*corev1.Node, groups map[string]*v1alpha1.NodeGroup, dss []daemonset.Pod) ([]*corev1.Node, map[string]bool) {
	if _, ok := p.Cloud.(cloudprovider.Suspender); !ok {
		return nodes, nil
	}
	var offered map[string]bool
	out := nodes
	for i, n := range nodes {
		if !p.resumable(n, groups) {
			continue
		}
		if offered == nil {
			offered, out = map[string]bool{}, slices.Clone(nodes)
		}
		out[i], offered[n.Name] = hr.Resumable(n, dss), true
	}
	return out, offered
}

// resumable reports whether a node is a suspended standby node berth
// launched that it may resume: neither it nor its group being deleted, not removed, not drifted
// or expired (the standby controller replaces those while idle), and not
// one whose resume failed less than resumeRetry ago.
func (p *Provisioner) resumable(n *corev1.Node, groups map[string]*v1alpha1.NodeGroup) bool {
	g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
	return g != nil && g.DeletionTimestamp == nil && n.DeletionTimestamp == nil && nodeutil.Suspended(n) && n.Annotations[v1alpha1.AnnotationLaunchedBy] == string(g.UID) &&
		lifecycle.Drifted(g, n) == nil && lifecycle.Expired(g, n, p.Clock.Now()) == nil && !p.resumeFailedRecently(n.Name)
}

// resumePlaced resumes the offered suspended nodes the plan put pods or
// units on. A node that cannot be resumed is not
// offered for resumeRetry; its pods are planned again next round.
func (p *Provisioner) resumePlaced(ctx context.Context, plan *scaleup.Plan, offered map[string]bool, groups map[string]*v1alpha1.NodeGroup,
	nodes []*corev1.Node, dss []daemonset.Pod, pending map[types.NamespacedName]*corev1.Pod, res *Result) {
	if len(offered) == 0 {
		return
	}
	s := p.Cloud.(cloudprovider.Suspender) // offerSuspended offers nothing otherwise
	placed := map[string][]scaleup.PodRef{}
	for _, pl := range plan.ExistingNodePlacements {
		if offered[pl.Node] {
			placed[pl.Node] = append(placed[pl.Node], pl.Pod)
		}
	}
	for _, n := range nodes {
		if len(placed[n.Name]) == 0 {
			continue
		}
		ng := groups[n.Labels[v1alpha1.LabelNodeGroup]]
		if err := s.Resume(ctx, n.Name); err != nil {
			p.markResumeFailed(n.Name)
			log.FromContext(ctx).Info("could not resume the standby node the plan uses; planning without it for a while", "node", n.Name, "error", err.Error())
			continue
		}
		off := cloudprovider.Offering{InstanceType: n.Labels[v1alpha1.LabelInstanceType], Zone: n.Labels[v1alpha1.LabelZone],
			CapacityType: v1alpha1.CapacityType(n.Labels[v1alpha1.LabelCapacityType])}
		inst := &cloudprovider.Instance{NodeName: n.Name, NodeGroup: ng.Name, Offering: off, CreatedAt: p.Clock.Now()}
		p.inflight.addResumed(hr.Resumable(n, dss)) // stands in for it until the cache shows the resume
		nn := scaleup.NewNode{NodeGroup: ng.Name, InstanceType: off.InstanceType, Zone: off.Zone, CapacityType: string(off.CapacityType), Pods: placed[n.Name]}
		if _, o := ng.FindOffering(off.InstanceType, off.Zone, off.CapacityType); o != nil {
			nn.PricePerHour, _ = o.Price()
		}
		p.launched(ctx, nn, ng, off, inst, resultResumed, pending)
		res.Launched = append(res.Launched, inst)
	}
}

func (p *Provisioner) resumeFailedRecently(name string) bool {
	p.resumeMu.Lock()
	defer p.resumeMu.Unlock()
	at, ok := p.resumeFailed[name]
	return ok && p.Clock.Since(at) < resumeRetry
}

func (p *Provisioner) markResumeFailed(name string) {
	p.resumeMu.Lock()
	defer p.resumeMu.Unlock()
	if p.resumeFailed == nil || len(p.resumeFailed) > 1000 {
		p.resumeFailed = map[string]time.Time{}
	}
	p.resumeFailed[name] = p.Clock.Now()
}
