package dashboard

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Input is the cluster as Read reads it.
type Input struct {
	Now        time.Time
	NodeGroups []v1alpha1.NodeGroup
	Nodes      []corev1.Node
	Pods       []corev1.Pod
	Headrooms  []v1alpha1.Headroom
	Events     []eventsv1.Event
}

// Build makes the view of the cluster (History and Problems are the
// server's to fill in).
func Build(in Input) View {
	v := View{Time: in.Now, Totals: Sample{Time: in.Now}}
	v.NodeGroups = nodeGroups(in, &v.Totals)
	v.Disruptions = disruptions(in)
	v.Headrooms = headrooms(in.Headrooms, &v.Totals)
	all := pending(in)
	v.Totals.Pending = len(all)
	v.Pending = all[:min(len(all), maxPending)]
	v.Decisions = decisions(in.Events, maxDecisions)
	return v
}

// nodeGroups lists each group with its nodes, by name, and adds them up
// in totals.
func nodeGroups(in Input, totals *Sample) []NodeGroup {
	byGroup := map[string][]*corev1.Node{}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if g := n.Labels[v1alpha1.LabelNodeGroup]; g != "" {
			byGroup[g] = append(byGroup[g], n)
		}
	}
	out := make([]NodeGroup, 0, len(in.NodeGroups))
	for i := range in.NodeGroups {
		ng := &in.NodeGroups[i]
		g := NodeGroup{Name: ng.Name, Provider: provider(ng), MinSize: ng.Spec.MinSize, MaxSize: ng.Spec.MaxSize,
			Offerings: []Offering{}, NodeList: []Node{}}
		for _, c := range ng.Status.Conditions {
			if c.Status == metav1.ConditionTrue {
				g.Conditions = append(g.Conditions, Condition{Type: c.Type, Reason: c.Reason, Message: c.Message})
			}
		}
		offerings := map[Offering]int{}
		for _, n := range byGroup[ng.Name] {
			node := nodeOf(ng, n, in.Now)
			g.NodeList = append(g.NodeList, node)
			g.Nodes++
			if node.Ready {
				g.ReadyNodes++
			}
			g.PricePerHour += node.PricePerHour
			offerings[Offering{InstanceType: node.InstanceType, Zone: node.Zone, CapacityType: node.CapacityType, PricePerHour: node.PricePerHour}]++
		}
		for o, count := range offerings {
			o.Nodes = count
			g.Offerings = append(g.Offerings, o)
		}
		slices.SortFunc(g.Offerings, func(a, b Offering) int {
			return cmp.Or(cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.CapacityType, b.CapacityType))
		})
		slices.SortFunc(g.NodeList, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
		totals.Nodes += g.Nodes
		totals.ReadyNodes += g.ReadyNodes
		totals.PricePerHour += g.PricePerHour
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b NodeGroup) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func provider(ng *v1alpha1.NodeGroup) string {
	switch {
	case ng.Spec.Provider.ClusterAPI != nil:
		return "clusterAPI"
	case ng.Spec.Provider.KWOK != nil:
		return "kwok"
	}
	return ""
}

// nodeOf describes a node of group ng; its price is its offering's.
func nodeOf(ng *v1alpha1.NodeGroup, n *corev1.Node, now time.Time) Node {
	node := Node{
		Name: n.Name, InstanceType: n.Labels[v1alpha1.LabelInstanceType], Zone: n.Labels[v1alpha1.LabelZone],
		CapacityType: n.Labels[v1alpha1.LabelCapacityType], Ready: ready(n),
		Age: duration.HumanDuration(now.Sub(n.CreationTimestamp.Time)),
	}
	if _, o := ng.FindOffering(node.InstanceType, node.Zone, v1alpha1.CapacityType(node.CapacityType)); o != nil {
		if p, err := o.Price(); err == nil {
			node.PricePerHour = p
		}
	}
	if c := disruptionCondition(n); c != nil {
		node.State = c.Reason
	}
	return node
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func disruptionCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1alpha1.NodeConditionDisruption {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// keptAnyway are the BerthDisruption reasons of nodes that are simply in
// use, starting, or awaited by a pod: the node list shows them, the
// disruption list does not (it is for drains and for rules one may act on).
var keptAnyway = map[string]bool{"Needed": true, "Launching": true, "NoHome": true, "Headroom": true, "PodNominated": true}

// disruptions lists the nodes berth disrupts, then those a rule keeps,
// each by name.
func disruptions(in Input) []Disrupted {
	out := []Disrupted{}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		c := disruptionCondition(n)
		if c == nil || (c.Status != corev1.ConditionTrue && keptAnyway[c.Reason]) {
			continue
		}
		out = append(out, Disrupted{
			Node: n.Name, NodeGroup: n.Labels[v1alpha1.LabelNodeGroup], Active: c.Status == corev1.ConditionTrue,
			Reason: c.Reason, Message: c.Message, Since: duration.HumanDuration(in.Now.Sub(c.LastTransitionTime.Time)),
		})
	}
	slices.SortFunc(out, func(a, b Disrupted) int {
		if a.Active != b.Active {
			if a.Active {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Node, b.Node)
	})
	return out
}

// headrooms lists each Headroom's units, by name, and adds them up.
func headrooms(hrs []v1alpha1.Headroom, totals *Sample) []Headroom {
	out := make([]Headroom, 0, len(hrs))
	for i := range hrs {
		h := &hrs[i]
		v := Headroom{Name: h.Name, Desired: h.Status.DesiredUnits, Ready: h.Status.ReadyUnits, Placeholders: h.Spec.Placeholders,
			Schedule: h.Status.ActiveSchedule, ReservedNodes: h.Status.ReservedNodes}
		if h.Status.Unit != nil {
			v.Unit = resources(h.Status.Unit.Resources)
		}
		for _, l := range h.Status.LearnedUnits {
			v.Unit += fmt.Sprintf("; learned: %d x %s", l.Count, resources(l.Resources))
		}
		if h.Spec.PerNode != nil {
			v.Reserve = resources(h.Spec.PerNode.Resources)
		}
		for _, c := range h.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady && c.Status != metav1.ConditionTrue {
				v.Message = c.Message
			}
		}
		totals.HeadroomDesired += v.Desired
		totals.HeadroomReady += v.Ready
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Headroom) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// resources writes a resource list as cpu=500m,memory=512Mi, by name.
func resources(rl corev1.ResourceList) string {
	parts := make([]string, 0, len(rl))
	for _, name := range slices.Sorted(maps.Keys(rl)) {
		q := rl[name]
		parts = append(parts, string(name)+"="+q.String())
	}
	return strings.Join(parts, ",")
}
