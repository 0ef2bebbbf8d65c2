package scaleup

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/binpack"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// OptionKeys are the node labels that differ between the options of one
// node group template.
var OptionKeys = []string{v1alpha1.LabelInstanceType, v1alpha1.LabelCapacityType, v1alpha1.LabelArch,
	v1alpha1.LabelInstanceTypeBeta, v1alpha1.LabelArchBeta}

// Offering names an offering of a node group (v1alpha1.OfferingKey).
type Offering = v1alpha1.OfferingKey

// optionRef is what the planner keeps of an option.
type optionRef struct {
	Offering
	group *v1alpha1.NodeGroup
}

// buildTemplates turns node groups into templates, one per group and zone,
// each with the options (instance type x capacity type) offered in the
// zone, minus the unavailable offerings; and one per value of the split
// keys too (topologyOptionKeys), so that a planned node carries them.
// An option's allocatable is what the group's nodes of its type have
// (observed.effective). The options of a zone come from cache when
// nothing they depend on changed (a nil cache builds them all).
func buildTemplates(groups []*v1alpha1.NodeGroup, daemonSets []*appsv1.DaemonSet, unavailable map[Offering]bool, seen *observed,
	split []string, ports []snapshot.HostPort, cache *Options) ([]*binpack.Template, error) {
	var out []*binpack.Template
	dssKey, cacheable := daemonSetsKey(daemonSets)
	var dss []daemonset.Pod
	built := false
	defer cache.sweep()
	for _, ng := range groups {
		zones := map[string]bool{}
		for _, it := range ng.Spec.InstanceTypes {
			for _, o := range it.Offerings {
				zones[o.Zone] = true
			}
		}
		for _, zone := range slices.Sorted(maps.Keys(zones)) {
			opts, err := cache.get(ng, zone, dssKey, cacheable, unavailable, seen, func() ([]*snapshot.Option, error) {
				if !built {
					dss, built = daemonset.Pods(daemonSets), true
				}
				return zoneOptions(ng, zone, dss, unavailable, seen)
			})
			if err != nil {
				return nil, err
			}
			if len(opts) == 0 {
				continue
			}
			for _, part := range splitByKeys(opts, split) {
				byPorts := splitByDaemonSetPorts(part, ports)
				for i, p := range byPorts {
					t := newTemplate(ng, zone, p, split)
					if len(byPorts) > 1 { // template names are hostnames: one each
						t.Node.Name = fmt.Sprintf("%s-ports-%d", t.Node.Name, i)
						t.Node.Node.Labels[v1alpha1.LabelHostname] = t.Node.Name
					}
					out = append(out, t)
				}
			}
		}
	}
	return out, nil
}

// zoneOptions are the options a node group offers in a zone. Their nodes,
// options and references are allocated in one slab each: a round builds
// every option of every group (thousands for a large catalogue).
func zoneOptions(ng *v1alpha1.NodeGroup, zone string, dss []daemonset.Pod, unavailable map[Offering]bool, seen *observed) ([]*snapshot.Option, error) {
	type offering struct {
		it  *v1alpha1.InstanceType
		off *v1alpha1.Offering
		key Offering
	}
	n := 0
	for i := range ng.Spec.InstanceTypes {
		for j := range ng.Spec.InstanceTypes[i].Offerings {
			if ng.Spec.InstanceTypes[i].Offerings[j].Zone == zone {
				n++
			}
		}
	}
	offs := make([]offering, 0, n)
	for i := range ng.Spec.InstanceTypes {
		it := &ng.Spec.InstanceTypes[i]
		for j := range it.Offerings {
			off := &it.Offerings[j]
			if off.Zone != zone {
				continue
			}
			key := Offering{NodeGroup: ng.Name, InstanceType: it.Name, Zone: off.Zone, CapacityType: string(off.CapacityType)}
			if !unavailable[key] {
				offs = append(offs, offering{it, off, key})
			}
		}
	}
	taints := ng.NodeTaints()
	nodes, all, refs := make([]corev1.Node, len(offs)), make([]snapshot.Option, len(offs)), make([]optionRef, len(offs))
	opts := make([]*snapshot.Option, len(offs))
	for k, o := range offs {
		if err := buildOption(ng, o.it, seen, o.off, o.key, taints, dss, &nodes[k], &all[k], &refs[k]); err != nil {
			return nil, err
		}
		opts[k] = &all[k]
	}
	return holdingTheirDaemonSets(opts), nil
}

// holdingTheirDaemonSets are the options whose DaemonSet pods fit on them
// (cpu, memory, pod slots, and ephemeral storage where the type says how
// much it has): on the others an agent,
// perhaps the network's, could never run, though a pod that requests none
// of what they lack would fit. When no option holds them all, every
// option stays, as kube-scheduler would still bind pods there.
func holdingTheirDaemonSets(opts []*snapshot.Option) []*snapshot.Option {
	holds := func(o *snapshot.Option) bool {
		a, d := &o.Allocatable, &o.Overhead
		return d.MilliCPU <= a.MilliCPU && d.Memory <= a.Memory && o.OverheadPods <= o.AllowedPods &&
			(a.EphemeralStorage == 0 || d.EphemeralStorage <= a.EphemeralStorage) // a type that does not say holds it
	}
	out := slices.DeleteFunc(slices.Clone(opts), func(o *snapshot.Option) bool { return !holds(o) })
	if len(out) == 0 || len(out) == len(opts) {
		return opts
	}
	return out
}

// newTemplate is the template of a group's options opts in a zone. It
// carries the labels every option agrees on: the group's and zone's, and
// an option label when all options share its value (always so for the
// split keys).
func newTemplate(ng *v1alpha1.NodeGroup, zone string, opts []*snapshot.Option, split []string) *binpack.Template {
	fixed := maps.Clone(opts[0].Node.Labels)
	for _, k := range OptionKeys {
		for _, o := range opts[1:] {
			if o.Node.Labels[k] != fixed[k] {
				delete(fixed, k)
				break
			}
		}
	}
	name := "template-" + ng.Name + "-" + zone
	for _, k := range split {
		name += "-" + fixed[k]
	}
	fixed[v1alpha1.LabelHostname] = name
	taints := opts[0].Node.Spec.Taints
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: fixed}, Spec: corev1.NodeSpec{Taints: taints}}
	return &binpack.Template{
		// Template as SetTemplates marks it: markWanted asks the DRA model
		// about it before.
		Node: &snapshot.Node{Node: obj, Taints: taints, NodeGroup: ng.Name, Flex: &snapshot.Flex{Options: opts}, HostPorts: commonPorts(opts),
			Template: true},
		Group:  ng.Name,
		Weight: ng.Spec.Weight,
		Zone:   zone,
	}
}

// buildOption fills node, o and ref with the option of an offering, whose
// node has what the group's nodes of the type were seen to have
// (observed.effective) and counts in limits as the type's capacity (and,
// of what the type does not say, as what the nodes have).
func buildOption(ng *v1alpha1.NodeGroup, it *v1alpha1.InstanceType, seen *observed, off *v1alpha1.Offering, key Offering,
	taints []corev1.Taint, dss []daemonset.Pod, node *corev1.Node, o *snapshot.Option, ref *optionRef) error {
	price, err := off.Price()
	if err != nil {
		return fmt.Errorf("node group %s, instance type %s, zone %s: invalid pricePerHour %q", ng.Name, it.Name, off.Zone, off.PricePerHour)
	}
	*node = corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "option", Labels: ng.NodeLabels(it, off)}, Spec: corev1.NodeSpec{Taints: taints}}
	allocatable, observed := seen.effective(ng.Name, it)
	pods := v1alpha1.DefaultPodsPerNode
	if q, ok := allocatable[corev1.ResourcePods]; ok {
		pods = int(q.Value())
	}
	*ref = optionRef{Offering: key, group: ng}
	*o = snapshot.Option{
		InstanceType: it.Name, CapacityType: string(off.CapacityType), Price: price,
		Allocatable: snapshot.FromList(allocatable), AllowedPods: pods, Node: node,
		Ref: ref, Slices: it.ResourceSlices(node.Name),
	}
	if observed {
		capacity := snapshot.FromList(it.Capacity)
		capacity.Max(&o.Allocatable) // a resource the type does not say counts as the nodes have it
		o.Capacity = &capacity
	}
	for _, ds := range dss {
		if ds.RunsOn(node) {
			o.Overhead.Add(&ds.Requests)
			o.OverheadPods++
			o.OverheadPorts = append(o.OverheadPorts, ds.Ports...)
		}
	}
	if p := seen.perNodeOf(ng.Name); p != nil {
		o.Overhead.Add(&p.requests)
		o.OverheadPods += p.pods
		o.OverheadPorts = append(o.OverheadPorts, p.ports...)
	}
	return nil
}

// splitByDaemonSetPorts splits a template's options by which of the host
// ports pending pods ask for (wanted) their DaemonSets hold, when some
// options hold one and others do not: a template's node holds only the
// ports all its options hold (commonPorts), and a pod asking for a port
// an agent holds on some types only would be planned on one of those
// types, where the agent takes the port once the node is up (Karpenter
// drops such instance types for the pod). Otherwise the options stay
// together (most rounds: no pod asks for a host port).
func splitByDaemonSetPorts(opts []*snapshot.Option, wanted []snapshot.HostPort) [][]*snapshot.Option {
	if len(wanted) == 0 {
		return [][]*snapshot.Option{opts}
	}
	pattern := func(o *snapshot.Option) string {
		b := make([]byte, len(wanted))
		for i, w := range wanted {
			b[i] = '0'
			if slices.ContainsFunc(o.OverheadPorts, w.Conflicts) {
				b[i] = '1'
			}
		}
		return string(b)
	}
	var keys []string
	parts := map[string][]*snapshot.Option{}
	for _, o := range opts {
		k := pattern(o)
		if _, ok := parts[k]; !ok {
			keys = append(keys, k)
		}
		parts[k] = append(parts[k], o)
	}
	if len(keys) == 1 {
		return [][]*snapshot.Option{opts}
	}
	out := make([][]*snapshot.Option, len(keys))
	for i, k := range keys {
		out[i] = parts[k]
	}
	return out
}

// commonPorts are the DaemonSet host ports every option holds: a node
// launched from the template has them taken, whichever option it gets.
func commonPorts(opts []*snapshot.Option) []snapshot.HostPort {
	var out []snapshot.HostPort
	for _, hp := range opts[0].OverheadPorts {
		if !slices.ContainsFunc(opts[1:], func(o *snapshot.Option) bool { return !slices.Contains(o.OverheadPorts, hp) }) {
			out = append(out, hp)
		}
	}
	return out
}

// markWanted marks the templates a pending pod could use: it tolerates
// the template's taints, and one of the template's options matches its
// required node selection and holds it (its own requests and a pod slot,
// with the option's DaemonSet overhead) and, for a pod with device
// claims, gives it its devices. A node may be launched from them this
// round, so every spread counts their domains (snapshot.Node.Wanted); a
// zone whose options are all too small for every pending pod, or lack
// their devices, is launched into by none.
func markWanted(s *snapshot.Snapshot, templates []*binpack.Template, pending []*corev1.Pod, addOnPods map[string]int) {
	// A pod's affinity and needs are read only when a template's taints
	// let it in: most templates are wanted by the first pod looked at.
	affinities := make([]*nodeaffinity.RequiredNodeAffinity, len(pending))
	needs := make([]snapshot.Resources, len(pending))
	pods := make([]int, len(pending))
	classes := make([]*snapshot.Class, len(pending)) // of the pods with device claims
	for _, t := range templates {
		t.Node.Wanted = false
		for i, p := range pending {
			if _, untolerated := snapshot.UntoleratedTaint(t.Node.Taints, p.Spec.Tolerations); untolerated {
				continue
			}
			if affinities[i] == nil {
				aff := nodeaffinity.GetRequiredNodeAffinity(p)
				affinities[i] = &aff
				needs[i], pods[i] = snapshot.NeedsOnNewNode(p, addOnPods)
				if len(p.Spec.ResourceClaims) > 0 {
					classes[i], _ = s.Classify(p) // a pod that cannot be classified is judged without its devices
				}
			}
			launchable := false
			if c := classes[i]; c != nil {
				launchable = s.LaunchableForClass(c, t.Node)
			} else {
				launchable = snapshot.LaunchableFor(*affinities[i], &needs[i], pods[i], t.Node)
			}
			if launchable {
				t.Node.Wanted = true
				break
			}
		}
	}
}

// wantedPorts are the host ports pending pods ask for, each once.
func wantedPorts(pending []*corev1.Pod) []snapshot.HostPort {
	var out []snapshot.HostPort
	for _, p := range pending {
		for _, hp := range snapshot.HostPortsOf(p) {
			if !slices.Contains(out, hp) {
				out = append(out, hp)
			}
		}
	}
	return out
}
