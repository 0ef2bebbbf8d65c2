package provisioning

import (
	"context"
	"slices"
	"strings"
	"sync"
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
)

// resumeRetry is how long a suspended node whose resume failed is not
// offered to the planner again.
const resumeRetry = time.Minute

// offerSuspended shows the planner the suspended standby nodes berth
// launched as nodes it may resume (headroom.Resumable): pods and running
// units fill them before new nodes are planned. It returns the nodes and
// the names of those offered.
func (p *Provisioner) offerSuspended(nodes []*corev1.Node, groups map[string]*v1alpha1.NodeGroup) ([]*corev1.Node, map[string]bool) {
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
		out[i], offered[n.Name] = hr.Resumable(n), true
	}
	return out, offered
}

// resumable reports whether a node is a suspended standby node berth
// launched that it may resume: not being deleted or removed, not drifted
// or expired (the standby controller replaces those while idle), and not
// one whose resume failed less than resumeRetry ago.
func (p *Provisioner) resumable(n *corev1.Node, groups map[string]*v1alpha1.NodeGroup) bool {
	g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
	return g != nil && n.DeletionTimestamp == nil && nodeutil.Suspended(n) && n.Annotations[v1alpha1.AnnotationLaunchedBy] == string(g.UID) &&
		lifecycle.Drifted(g, n) == nil && lifecycle.Expired(g, n, p.Clock.Now()) == nil && !p.resumeFailedRecently(n.Name)
}

// resumePlaced resumes the offered suspended nodes the plan put pods or
// units on, each once, and returns their names. A node that cannot be
// resumed is not offered for resumeRetry; its pods are planned again next
// round.
func (p *Provisioner) resumePlaced(ctx context.Context, plan *scaleup.Plan, offered map[string]bool, groups map[string]*v1alpha1.NodeGroup,
	nodes []*corev1.Node, pending map[types.NamespacedName]*corev1.Pod, res *Result) map[string]bool {
	if len(offered) == 0 {
		return nil
	}
	resumed := map[string]bool{}
	s := p.Cloud.(cloudprovider.Suspender) // offerSuspended offers nothing otherwise
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		if offered[n.Name] {
			byName[n.Name] = n
		}
	}
	placed := map[string][]scaleup.PodRef{}
	var order []string
	for _, pl := range plan.ExistingNodePlacements {
		if !offered[pl.Node] {
			continue
		}
		if _, seen := placed[pl.Node]; !seen {
			order = append(order, pl.Node)
		}
		placed[pl.Node] = append(placed[pl.Node], pl.Pod)
	}
	for _, name := range order {
		n := byName[name]
		ng := groups[n.Labels[v1alpha1.LabelNodeGroup]]
		if err := s.Resume(ctx, name); err != nil {
			p.markResumeFailed(name)
			log.FromContext(ctx).Info("could not resume the standby node the plan uses; planning without it for a while", "node", name, "error", err.Error())
			continue
		}
		off := cloudprovider.Offering{InstanceType: n.Labels[v1alpha1.LabelInstanceType], Zone: n.Labels[v1alpha1.LabelZone],
			CapacityType: v1alpha1.CapacityType(n.Labels[v1alpha1.LabelCapacityType])}
		inst := &cloudprovider.Instance{NodeName: name, NodeGroup: ng.Name, Offering: off, CreatedAt: p.Clock.Now()}
		p.inflight.addResumed(hr.Resumable(n)) // stands in for it until the cache shows the resume
		resumed[name] = true
		nn := scaleup.NewNode{NodeGroup: ng.Name, InstanceType: off.InstanceType, Zone: off.Zone, CapacityType: string(off.CapacityType), Pods: placed[name]}
		if _, o := ng.FindOffering(off.InstanceType, off.Zone, off.CapacityType); o != nil {
			nn.PricePerHour, _ = o.Price()
		}
		p.launched(ctx, nn, ng, off, inst, resultResumed, pending)
		res.Launched = append(res.Launched, inst)
	}
	return resumed
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

// standbyPool hands out the round's suspended standby nodes (those berth
// launched, by offering), each once, to the launch workers.
type standbyPool struct {
	mu     sync.Mutex
	byKind map[v1alpha1.OfferingKey][]string
}

func (p *Provisioner) newStandbyPool(nodes []*corev1.Node, groups map[string]*v1alpha1.NodeGroup, resumed map[string]bool) *standbyPool {
	pool := &standbyPool{byKind: map[v1alpha1.OfferingKey][]string{}}
	for _, n := range nodes {
		if !p.resumable(n, groups) || resumed[n.Name] {
			continue
		}
		g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
		key := v1alpha1.OfferingKey{NodeGroup: g.Name, InstanceType: n.Labels[v1alpha1.LabelInstanceType], Zone: n.Labels[v1alpha1.LabelZone],
			CapacityType: n.Labels[v1alpha1.LabelCapacityType]}
		pool.byKind[key] = append(pool.byKind[key], n.Name)
	}
	for _, names := range pool.byKind {
		slices.SortFunc(names, strings.Compare) // the same node first every round
	}
	return pool
}

// take returns a suspended node of the offering not handed out yet; ""
// when none is left.
func (s *standbyPool) take(key v1alpha1.OfferingKey) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.byKind[key]
	if len(names) == 0 {
		return ""
	}
	s.byKind[key] = names[1:]
	return names[0]
}

// resume resumes a suspended standby node of the planned node's offering
// instead of launching one: it runs at the same price and turns Ready
// after the group's resume delay, sooner than a launch. nil when there is
// none, or the provider cannot resume it (the caller then launches).
func (p *Provisioner) resume(ctx context.Context, pool *standbyPool, nn scaleup.NewNode, ng *v1alpha1.NodeGroup, off cloudprovider.Offering) *cloudprovider.Instance {
	s, ok := p.Cloud.(cloudprovider.Suspender)
	if !ok {
		return nil
	}
	for {
		name := pool.take(nn.Offering())
		if name == "" {
			return nil
		}
		if err := s.Resume(ctx, name); err != nil {
			log.FromContext(ctx).Info("could not resume standby node; trying another or launching", "node", name, "error", err.Error())
			continue
		}
		inst := &cloudprovider.Instance{NodeName: name, NodeGroup: ng.Name, Offering: off, CreatedAt: p.Clock.Now()}
		if n := syntheticNode(ng, inst); n != nil {
			n.Annotations[v1alpha1.AnnotationResumedAt] = p.Clock.Now().UTC().Format(time.RFC3339)
			p.inflight.addResumed(n)
		}
		return inst
	}
}
