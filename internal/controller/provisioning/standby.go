package provisioning

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// standbyPool hands out the round's suspended standby nodes (those berth
// launched, by offering), each once, to the launch workers.
type standbyPool struct {
	mu     sync.Mutex
	byKind map[v1alpha1.OfferingKey][]string
}

func newStandbyPool(nodes []*corev1.Node, groups map[string]*v1alpha1.NodeGroup) *standbyPool {
	pool := &standbyPool{byKind: map[v1alpha1.OfferingKey][]string{}}
	for _, n := range nodes {
		g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
		if g == nil || n.DeletionTimestamp != nil || !nodeutil.Suspended(n) || n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(g.UID) {
			continue
		}
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
