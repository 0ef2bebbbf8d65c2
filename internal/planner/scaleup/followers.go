package scaleup

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// A follower is a pending pod that must run on the node of exactly one
// other pending pod, its leader: its only required pod-affinity term is on
// the hostname and selects the leader and no other pod, pending or bound.
// The headroom pods a CSI driver creates next to a workload (the
// Mountpoint S3 driver's, priority -1000, pod affinity to the workload)
// and berth's own companion placeholders are followers. Planned as
// separate pods, a follower waits until its leader is placed and then may
// find the leader's node full, so that nobody sizes a node for both. The
// planner therefore folds followers into their leader as a companion
// add-on (the same mechanism as CompanionProfile workloads, with a share
// key of the follower's own, never shared) and puts them on the leader's
// node in the plan.

// followers is the result of folding: the pending pods to plan (leaders
// replaced by copies carrying their followers' requests) and, per leader,
// its followers.
type followers struct {
	pending []*corev1.Pod
	of      map[types.NamespacedName][]*corev1.Pod
	// pods counts, by the share key of each root's add-on, the followers
	// folded into it (snapshot.Snapshot.SetAddOnPods).
	pods map[string]int
}

// foldFollowers finds followers among pending and folds each into the
// root of its chain (chains.go); vols resolves their volumes (called
// only when there are followers), placeable tells whether a narrowed
// root could get a node at all.
func foldFollowers(pending, bound []*corev1.Pod, vols func() snapshot.Volumes, placeable func(*corev1.Pod) bool) followers {
	out := followers{of: map[types.NamespacedName][]*corev1.Pod{}, pods: map[string]int{}}
	leaderOf := map[*corev1.Pod]*corev1.Pod{}
	for _, p := range pending {
		if l := leader(p, pending, bound); l != nil {
			leaderOf[p] = l
		}
	}
	if len(leaderOf) == 0 {
		out.pending = pending
		return out
	}
	c := chains(leaderOf, pending, bound, vols(), placeable)
	if len(c.narrowed) == 0 {
		out.pending = pending
		return out
	}
	addOns := map[*corev1.Pod]corev1.ResourceList{}
	for _, f := range sortedFollowers(leaderOf) {
		r := c.rootOf[f]
		if r == nil {
			continue
		}
		rl := addOns[r]
		if rl == nil {
			rl = corev1.ResourceList{}
		}
		for name, q := range resource.PodRequests(f, resource.PodResourcesOptions{}) {
			sum := rl[name]
			sum.Add(q)
			rl[name] = sum
		}
		addOns[r] = rl
		key := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
		out.of[key] = append(out.of[key], f)
	}
	for _, p := range pending {
		if c.rootOf[p] != nil {
			continue // folded
		}
		if rl := addOns[p]; rl != nil {
			p = withAddOn(c.narrowed[p], rl)
			out.pods[p.Labels[v1alpha1.LabelCompanionShareKey]] = len(out.of[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}])
		} else if n := c.narrowed[p]; n != nil {
			p = n // narrowed by followers planned on their own
		}
		out.pending = append(out.pending, p)
	}
	return out
}

// sortedFollowers returns the followers in a stable order (namespace,
// name), so that which followers fold does not depend on map order.
func sortedFollowers(leaderOf map[*corev1.Pod]*corev1.Pod) []*corev1.Pod {
	fs := slices.Collect(maps.Keys(leaderOf))
	slices.SortFunc(fs, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return fs
}

// withAddOn is a copy of leader p carrying the add-on rl under a share key
// of its own.
func withAddOn(p *corev1.Pod, rl corev1.ResourceList) *corev1.Pod {
	raw, err := json.Marshal(rl)
	if err != nil {
		return p
	}
	c := p.DeepCopy()
	c.Labels = maps.Clone(c.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Annotations = maps.Clone(c.Annotations)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Labels[v1alpha1.LabelCompanionShareKey] = "followers-" + string(p.UID)
	if p.UID == "" {
		c.Labels[v1alpha1.LabelCompanionShareKey] = "followers-" + p.Namespace + "." + p.Name
	}
	c.Annotations[v1alpha1.AnnotationCompanionRequests] = string(raw)
	return c
}

// leader returns the one pending pod p must share a node with, or nil.
func leader(p *corev1.Pod, pending, bound []*corev1.Pod) *corev1.Pod {
	a := p.Spec.Affinity
	if a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		return nil
	}
	t := &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if t.TopologyKey != corev1.LabelHostname || t.NamespaceSelector != nil || t.LabelSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil || sel.Empty() {
		return nil
	}
	nss := t.Namespaces
	if len(nss) == 0 {
		nss = []string{p.Namespace}
	}
	matches := func(o *corev1.Pod) bool {
		return o != p && slices.Contains(nss, o.Namespace) && sel.Matches(labels.Set(o.Labels))
	}
	for _, o := range bound {
		if matches(o) {
			return nil // the leader, or another match, is placed already
		}
	}
	var found *corev1.Pod
	for _, o := range pending {
		if matches(o) {
			if found != nil {
				return nil
			}
			found = o
		}
	}
	return found
}

// placeFollowers puts each leader's followers next to it in the plan: on
// its new node, its existing node, or unschedulable with it.
func placeFollowers(plan *Plan, of map[types.NamespacedName][]*corev1.Pod) {
	if len(of) == 0 {
		return
	}
	for i := range plan.NewNodes {
		for _, pod := range plan.NewNodes[i].Pods {
			for _, f := range of[pod.Key()] {
				plan.NewNodes[i].Pods = append(plan.NewNodes[i].Pods, ref(f))
			}
		}
	}
	for _, pl := range plan.ExistingNodePlacements {
		for _, f := range of[pl.Pod.Key()] {
			plan.ExistingNodePlacements = append(plan.ExistingNodePlacements, Placement{Pod: ref(f), Node: pl.Node})
		}
	}
	for _, u := range plan.Unschedulable {
		for _, f := range of[u.Pod.Key()] {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: ref(f), Message: "it must run next to " + u.Pod.String() + ", which fits nowhere: " + u.Message})
		}
	}
}
