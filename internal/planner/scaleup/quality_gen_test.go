package scaleup_test

import (
	"fmt"
	"math/rand/v2"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// This file generates the small random clusters of the cost-quality test
// and, next to each Kubernetes object, the plain model the exhaustive
// search reads (qConfig, qNode, qPod). The model is written from the API's
// meaning (capacity is allocatable, a DaemonSet's pod runs on every node
// its selector and tolerations allow), not from the planner's code.

const (
	qTaintKey = "dedicated"
	qPoolKey  = "pool"
	qAppKey   = "app"
)

// qConfig is one launchable offering: group x instance type x zone x
// capacity type, with the room a new node of it has for pending pods
// (capacity minus the DaemonSet pods that would run on it).
type qConfig struct {
	group, instanceType, zone, capacityType string
	// groupIdx and zoneIdx index qCase.room and qZones.
	groupIdx, zoneIdx int
	price             float64
	labels            map[string]string
	tainted           bool
	cpu, mem          int64 // free for pending pods
	pods              int   // pod slots free for pending pods
}

// qNode is an existing node: what is free on it now.
type qNode struct {
	name     string
	zoneIdx  int
	labels   map[string]string
	tainted  bool
	cpu, mem int64
	pods     int
}

// qPod is a pending pod.
type qPod struct {
	name      string
	cpu, mem  int64
	selector  map[string]string
	tolerates bool
	// anti is the index (0..3) of the app whose pods must be on different
	// nodes (required pod anti-affinity on the hostname), or -1.
	anti int
	app  int
	// spread: the app's pods spread over zones (maxSkew 1,
	// DoNotSchedule); such apps have no node selector and tolerate every
	// taint.
	spread bool
}

// qCase is one random cluster: the planner's input and the model.
type qCase struct {
	in       scaleup.Input
	configs  []qConfig
	existing []qNode
	pods     []qPod
	// room is how many nodes each group may still launch (maxSize minus
	// its existing nodes).
	room []int
}

func (p qPod) fits(labels map[string]string, tainted bool) bool {
	if tainted && !p.tolerates {
		return false
	}
	for k, v := range p.selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

type qDaemonSet struct {
	selector  map[string]string
	tolerates bool
	cpu, mem  int64
}

func (d qDaemonSet) runsOn(labels map[string]string, tainted bool) bool {
	return qPod{selector: d.selector, tolerates: d.tolerates}.fits(labels, tainted)
}

var qZones = []string{"zone-a", "zone-b"}

// genCase makes one cluster: 1-3 node groups with 1-5 instance types in
// one or two zones, on-demand and sometimes spot offerings, 0-2 DaemonSets,
// 0-6 existing nodes with some room (several per zone), a maxSize that
// leaves room for one to three more nodes on one group in three,
// and 1-10 pending pods of 1-4 apps, some with node selectors,
// tolerations of a group's taint, anti-affinity among the app's pods or a
// zone spread.
func genCase(r *rand.Rand) qCase {
	for {
		if c, ok := tryCase(r); ok {
			return c
		}
	}
}

// tryCase makes one cluster; ok is false when some pending pod fits no
// offering alone (DaemonSets can leave no room at all), so that the
// optimum always places every pod.
func tryCase(r *rand.Rand) (c qCase, ok bool) {
	nGroups := 1 + r.IntN(3)
	var dss []qDaemonSet
	for i := range r.IntN(3) {
		d := qDaemonSet{cpu: int64(100 + 100*r.IntN(5)), mem: int64(64<<20) * int64(1+r.IntN(8)), tolerates: r.IntN(2) == 0}
		if r.IntN(3) == 0 {
			d.selector = map[string]string{qPoolKey: fmt.Sprintf("g%d", r.IntN(nGroups))}
		}
		dss = append(dss, d)
		c.in.DaemonSets = append(c.in.DaemonSets, daemonSet(fmt.Sprintf("agent-%d", i), d))
	}
	for g := range nGroups {
		ng := genGroup(r, g)
		c.in.NodeGroups = append(c.in.NodeGroups, ng)
		for _, it := range ng.Spec.InstanceTypes {
			for _, off := range it.Offerings {
				labels := ng.NodeLabels(&it, &off)
				cfg := qConfig{
					group: ng.Name, instanceType: it.Name, zone: off.Zone, capacityType: string(off.CapacityType),
					groupIdx: g, zoneIdx: slices.Index(qZones, off.Zone),
					labels: labels, tainted: len(ng.Spec.Template.Taints) > 0,
					cpu: it.Capacity.Cpu().MilliValue(), mem: it.Capacity.Memory().Value(), pods: v1alpha1.DefaultPodsPerNode,
				}
				cfg.price, _ = off.Price()
				for _, d := range dss {
					if d.runsOn(labels, cfg.tainted) {
						cfg.cpu, cfg.mem, cfg.pods = cfg.cpu-d.cpu, cfg.mem-d.mem, cfg.pods-1
					}
				}
				if cfg.cpu > 0 && cfg.mem > 0 {
					c.configs = append(c.configs, cfg)
				}
			}
		}
	}
	for i := range r.IntN(7) {
		c.addExisting(r, i, dss)
	}
	c.addPending(r, nGroups)
	c.limitGroups(r)
	for _, p := range c.pods {
		if !slices.ContainsFunc(c.configs, func(cfg qConfig) bool {
			return p.fits(cfg.labels, cfg.tainted) && p.cpu <= cfg.cpu && p.mem <= cfg.mem && c.room[cfg.groupIdx] > 0
		}) {
			return c, false
		}
	}
	return c, true
}

func genGroup(r *rand.Rand, g int) *v1alpha1.NodeGroup {
	ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%d", g)}}
	ng.Spec.MaxSize = 100
	ng.Spec.Template.Labels = map[string]v1alpha1.LabelValue{qPoolKey: v1alpha1.LabelValue(ng.Name)}
	if r.IntN(3) == 0 {
		ng.Spec.Template.Taints = []v1alpha1.NodeTaint{{Key: qTaintKey, Value: ng.Name, Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	}
	zones := qZones[:1+r.IntN(2)]
	for t := range 1 + r.IntN(5) {
		cpu := []int64{1, 2, 4, 8}[r.IntN(4)]
		memGi := cpu * []int64{1, 2, 4, 8}[r.IntN(4)]
		base := (0.035*float64(cpu) + 0.004*float64(memGi)) * (0.8 + 0.4*r.Float64())
		it := v1alpha1.InstanceType{
			Name:     fmt.Sprintf("%s-t%d-%dc%dg", ng.Name, t, cpu, memGi),
			Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI)},
		}
		for _, z := range zones {
			zonal := base * (0.95 + 0.1*r.Float64())
			it.Offerings = append(it.Offerings, v1alpha1.Offering{Zone: z, CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: fmt.Sprintf("%.4f", zonal)})
			if r.IntN(2) == 0 {
				it.Offerings = append(it.Offerings, v1alpha1.Offering{Zone: z, CapacityType: v1alpha1.CapacityTypeSpot, PricePerHour: fmt.Sprintf("%.4f", zonal*(0.4+0.3*r.Float64()))})
			}
		}
		ng.Spec.InstanceTypes = append(ng.Spec.InstanceTypes, it)
	}
	return ng
}

// addExisting adds a Ready node of a random offering with a pod using part
// of it and the DaemonSet pods that run there.
func (c *qCase) addExisting(r *rand.Rand, i int, dss []qDaemonSet) {
	ng := c.in.NodeGroups[r.IntN(len(c.in.NodeGroups))]
	it := &ng.Spec.InstanceTypes[r.IntN(len(ng.Spec.InstanceTypes))]
	off := &it.Offerings[r.IntN(len(it.Offerings))]
	name := fmt.Sprintf("existing-%d", i)
	labels := ng.NodeLabels(it, off)
	labels[v1alpha1.LabelHostname] = name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, t := range ng.Spec.Template.Taints {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	node.Status.Capacity = it.Capacity.DeepCopy()
	node.Status.Capacity[corev1.ResourcePods] = *resource.NewQuantity(v1alpha1.DefaultPodsPerNode, resource.DecimalSI)
	node.Status.Allocatable = node.Status.Capacity.DeepCopy()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	c.in.Nodes = append(c.in.Nodes, node)
	qn := qNode{name: name, zoneIdx: slices.Index(qZones, off.Zone), labels: labels, tainted: len(node.Spec.Taints) > 0,
		cpu: it.Capacity.Cpu().MilliValue(), mem: it.Capacity.Memory().Value(), pods: v1alpha1.DefaultPodsPerNode}
	for j, d := range dss {
		if d.runsOn(labels, qn.tainted) {
			c.in.Pods = append(c.in.Pods, boundPod(fmt.Sprintf("agent-%d-%s", j, name), name, d.cpu, d.mem))
			qn.cpu, qn.mem, qn.pods = qn.cpu-d.cpu, qn.mem-d.mem, qn.pods-1
		}
	}
	usedCPU, usedMem := qn.cpu*int64(r.IntN(90))/100, qn.mem*int64(r.IntN(90))/100
	if usedCPU > 0 && usedMem > 0 {
		c.in.Pods = append(c.in.Pods, boundPod("used-"+name, name, usedCPU, usedMem))
		qn.cpu, qn.mem, qn.pods = qn.cpu-usedCPU, qn.mem-usedMem, qn.pods-1
	}
	c.existing = append(c.existing, qn)
}

// limitGroups gives one group in three a maxSize that leaves room for
// one to three more nodes (its existing nodes count); the others may grow
// to 100. Not in a case with a zone spread: while a group may launch, the
// zones it offers count as domains, and they stop counting when it is
// full, so which pods fit depends on the order they are placed in, which
// the exact model (final counts) does not follow.
func (c *qCase) limitGroups(r *rand.Rand) {
	spread := slices.ContainsFunc(c.pods, func(p qPod) bool { return p.spread })
	for _, ng := range c.in.NodeGroups {
		have := 0
		for _, n := range c.in.Nodes {
			if n.Labels[v1alpha1.LabelNodeGroup] == ng.Name {
				have++
			}
		}
		if r.IntN(3) == 0 && !spread {
			ng.Spec.MaxSize = int32(have + 1 + r.IntN(3))
		}
		c.room = append(c.room, int(ng.Spec.MaxSize)-have)
	}
}

// addPending adds 1-10 pods of 1-4 apps; an app whose pods fit nowhere
// alone is made plainer until they do, so the optimum places every pod.
func (c *qCase) addPending(r *rand.Rand, nGroups int) {
	nPods := 1 + r.IntN(10)
	nApps := 1 + r.IntN(4)
	apps := make([]qPod, nApps)
	for a := range apps {
		apps[a] = c.genApp(r, a, nGroups)
	}
	for i := range nPods {
		a := r.IntN(nApps)
		p := apps[a]
		p.name = fmt.Sprintf("app%d-%d", a, i)
		c.pods = append(c.pods, p)
		c.in.Pending = append(c.in.Pending, pendingPod(p))
	}
}

func (c *qCase) genApp(r *rand.Rand, a, nGroups int) qPod {
	p := qPod{app: a, anti: -1, cpu: int64(100 * (1 + r.IntN(30))), mem: int64(128<<20) * int64(1+r.IntN(40)), tolerates: r.IntN(3) == 0}
	switch r.IntN(8) {
	case 0:
		p.selector = map[string]string{qPoolKey: fmt.Sprintf("g%d", r.IntN(nGroups))}
	case 1:
		p.selector = map[string]string{v1alpha1.LabelCapacityType: string(v1alpha1.CapacityTypeOnDemand)}
	case 2:
		p.selector = map[string]string{v1alpha1.LabelZone: qZones[r.IntN(2)]}
	}
	if r.IntN(4) == 0 {
		p.anti = a
	}
	if r.IntN(4) == 0 {
		// Spread pods fit every offering, so that every zone a group can
		// launch into can take one (a zone that could not would hold the
		// others back for good, a case about feasibility, not cost).
		p.spread, p.selector, p.tolerates = true, nil, true
		for _, cfg := range c.configs {
			p.cpu, p.mem = min(p.cpu, cfg.cpu), min(p.mem, cfg.mem)
		}
		return p
	}
	for range 8 {
		for _, cfg := range c.configs {
			if p.fits(cfg.labels, cfg.tainted) && p.cpu <= cfg.cpu && p.mem <= cfg.mem {
				return p
			}
		}
		p.selector, p.tolerates, p.cpu, p.mem = nil, true, max(p.cpu/2, 50), max(p.mem/2, 64<<20)
	}
	return p
}

func daemonSet(name string, d qDaemonSet) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
	ds.Spec.Template.Spec.NodeSelector = d.selector
	if d.tolerates {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: qTaintKey, Operator: corev1.TolerationOpExists}}
	}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Image: "agent", Resources: requests(d.cpu, d.mem)}}
	return ds
}

func boundPod(name, node string, cpu, mem int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "c", Resources: requests(cpu, mem)}}
	p.Status.Phase = corev1.PodRunning
	return p
}

func pendingPod(q qPod) *corev1.Pod {
	app := fmt.Sprintf("app%d", q.app)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: q.name, Namespace: "default", Labels: map[string]string{qAppKey: app}}}
	p.Spec.NodeSelector = q.selector
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "c", Resources: requests(q.cpu, q.mem)}}
	if q.tolerates {
		p.Spec.Tolerations = []corev1.Toleration{{Key: qTaintKey, Operator: corev1.TolerationOpExists}}
	}
	if q.spread {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{qAppKey: app}},
		}}
	}
	if q.anti >= 0 {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{qAppKey: app}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
	}
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	return p
}

func requests(cpu, mem int64) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}}
}
