package clusterapi

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

var _ cloudprovider.UnadoptedLister = (*Provider)(nil)

// Unadopted names the Machines of the group's object that berth launched
// for the group (berth.dev/launched-by, before the group's deletion) and
// whose Node does not carry the group's owner mark yet, but not those
// made more than maxWait ago, given up (no infrastructure within the
// machine timeout, or failed) or being deleted. A group being deleted
// with deletionPolicy Drain waits for them: their nodes are adopted into
// it (Adopt) and removed as its others. Nothing is named while a live
// group names the same object: that group adopts the nodes.
func (p *Provider) Unadopted(ctx context.Context, ng *v1alpha1.NodeGroup, maxWait time.Duration) ([]string, error) {
	if ng.Spec.Provider.ClusterAPI == nil {
		return nil, nil
	}
	r, err := refOf(ng)
	if err != nil {
		return nil, err
	}
	if live, err := p.liveGroupNaming(ctx, ng, r); err != nil || live != "" {
		return nil, err
	}
	if r, err = p.withAnnotatedTimeout(ctx, ng, r); err != nil {
		return nil, err
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return nil, err
	}
	now := p.clock.Now()
	var out []string
	for _, m := range ms {
		if !launchedFor(m, ng) || now.Sub(m.Created) > maxWait || givenUp(m, now, r.timeout) || m.Deleting {
			continue
		}
		if m.NodeName != "" {
			node := &corev1.Node{}
			err := p.cluster.Get(ctx, client.ObjectKey{Name: m.NodeName}, node)
			if err == nil && node.Annotations[v1alpha1.AnnotationLaunchedBy] == string(ng.UID) {
				continue // adopted: one of the group's nodes, waited for as such
			} else if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("reading node %s of machine %s/%s: %w", m.NodeName, m.Namespace, m.Name, err)
			}
		}
		out = append(out, m.Name)
	}
	return out, nil
}

// withAnnotatedTimeout is r with the machine timeout the object's
// annotation gives (max-node-provision-time) when the group sets none, as
// a launch reads it (Create): a Machine is given up after the same time
// whichever asks. An object gone, or whose annotations do not parse,
// leaves r as the group says.
func (p *Provider) withAnnotatedTimeout(ctx context.Context, ng *v1alpha1.NodeGroup, r ref) (ref, error) {
	obj := r.object()
	if err := p.mgmt.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
		return r, nil
	} else if err != nil {
		return r, fmt.Errorf("reading %s: %w", r, err)
	}
	tmpl, err := ParseAnnotations(obj.GetAnnotations())
	if err != nil || tmpl.MachineTimeout == nil {
		return r, nil
	}
	applied := ng.DeepCopy()
	tmpl.Apply(applied)
	return refOf(applied)
}

// launchedFor reports whether berth launched m for ng (stampLaunch), before
// ng's deletion if it is being deleted.
func launchedFor(m machine, ng *v1alpha1.NodeGroup) bool {
	return m.Annotations[v1alpha1.AnnotationLaunchedBy] == string(ng.UID) &&
		(ng.DeletionTimestamp == nil || m.Created.Before(ng.DeletionTimestamp.Time))
}

// liveGroupNaming returns the name of a node group other than ng, not
// being deleted, that names ng's object ("" when none does).
func (p *Provider) liveGroupNaming(ctx context.Context, ng *v1alpha1.NodeGroup, r ref) (string, error) {
	groups := &v1alpha1.NodeGroupList{}
	if err := p.cluster.List(ctx, groups, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing node groups: %w", err)
	}
	var live []*v1alpha1.NodeGroup
	for i := range groups.Items {
		if g := &groups.Items[i]; g.Name != ng.Name && g.DeletionTimestamp == nil {
			live = append(live, g)
		}
	}
	return namedBy(live, r), nil
}

// namedBy returns the name of the first Cluster API group of groups that
// names r's object ("" when none does).
func namedBy(groups []*v1alpha1.NodeGroup, r ref) string {
	for _, g := range groups {
		if g.Spec.Provider.ClusterAPI == nil {
			continue
		}
		if gr, err := refOf(g); err == nil && gr.key() == r.key() {
			return g.Name
		}
	}
	return ""
}
