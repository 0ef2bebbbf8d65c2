package scaledown

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// contenders are the waiting pods that could take the room of a new node
// of the group before the replaced nodes' pods move there: kube-scheduler
// gives a new node's room to the pods that wait as soon as it is Ready. A
// pod contends when it fits on a new node of the group with its maxSize,
// limits and unavailable offerings lifted (fitIn: a pod held back by
// maxSize alone contends too), or when one of its required pod
// (anti-)affinity terms or DoNotSchedule spreads selects a moving pod
// (podutil.RequiredTermSelects): fitIn plans on the cluster before the
// move, and where those pods go changes where such a pod fits. Pods that
// wait for other groups only, or fit nowhere, do not contend.
func (p *planner) contenders(in Input, group string, movers []*corev1.Pod) ([]*corev1.Pod, error) {
	fit, err := p.fitIn(in, group)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, pod := range p.waiting {
		if fit[scaleup.PodRef{Namespace: pod.Namespace, Name: pod.Name}] ||
			slices.ContainsFunc(movers, func(m *corev1.Pod) bool { return podutil.RequiredTermSelects(pod, m, true) }) {
			out = append(out, pod)
		}
	}
	return out, nil
}

// fitIn returns the waiting pods that fit on new nodes of the group with
// its maxSize, limits and unavailable offerings lifted. The other groups
// are there with no room (maxSize and minSize 0), so that their nodes
// read as in every other what-if (their startup taints come from their
// group) and the kept model need not take them off. Planned once a round
// per group, when a replacement there first needs it.
func (p *planner) fitIn(in Input, group string) (map[scaleup.PodRef]bool, error) {
	if fit, ok := p.fit[group]; ok {
		return fit, nil
	}
	if p.groups[group] == nil {
		return nil, nil
	}
	groups := make([]*v1alpha1.NodeGroup, 0, len(in.NodeGroups))
	for _, g := range in.NodeGroups {
		g = g.DeepCopy()
		if g.Name == group {
			g.Spec.MaxSize, g.Spec.Limits = math.MaxInt32, nil
		} else {
			g.Spec.MaxSize, g.Spec.MinSize = 0, 0
		}
		groups = append(groups, g)
	}
	unbounded := in
	unbounded.Limits, unbounded.Unavailable = scaleup.Limits{Resources: corev1.ResourceList{}}, nil
	plan, err := p.planElsewhere(unbounded, groups, nil, p.waiting, nil)
	if err != nil {
		return nil, err
	}
	fit := map[scaleup.PodRef]bool{}
	for _, nn := range plan.NewNodes {
		if nn.NodeGroup != group {
			continue
		}
		for _, ref := range nn.Pods {
			fit[ref] = true
		}
	}
	if p.fit == nil {
		p.fit = map[string]map[scaleup.PodRef]bool{}
	}
	p.fit[group] = fit
	return fit, nil
}

// mayShareANode reports whether the pods' requests added up stay within
// the allocatable of some instance type of the group, resource by
// resource, and their count within its pods (resources a type does not
// list are not compared). When they do not, no plan puts them all on one
// new node, and none is made: a burst of waiting pods costs no plan.
func mayShareANode(g *v1alpha1.NodeGroup, pods []*corev1.Pod) bool {
	if g == nil {
		return true
	}
	sum := corev1.ResourceList{}
	for _, pod := range pods {
		for name, q := range snapshot.RequestsOf(pod) {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	sum[corev1.ResourcePods] = *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)
	for _, it := range g.Spec.InstanceTypes {
		fits := true
		for name, q := range sum {
			if c, ok := it.Capacity[name]; ok && q.Cmp(c) > 0 {
				fits = false
				break
			}
		}
		if fits {
			return true
		}
	}
	return false
}
