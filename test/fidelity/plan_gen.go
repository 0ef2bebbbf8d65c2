package fidelity

import (
	"fmt"
	"math/rand"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// PlanCase is a cluster berth plans a scale-up for: node groups whose
// options differ within a zone (spot and on-demand, amd64 and arm64,
// several instance types), nodes that run, pods bound to them, and the
// pending pods, with topology terms on every label a node group's options
// differ in.
type PlanCase struct {
	Groups     []*v1alpha1.NodeGroup
	Nodes      []*corev1.Node
	Bound      []*corev1.Pod
	Pending    []*corev1.Pod
	DaemonSets []*appsv1.DaemonSet
}

// planKeys are the topology keys of the generated terms: a node's own,
// the zone, and the three labels that differ between a group's options.
var planKeys = []string{hostKey, zoneKey, v1alpha1.LabelCapacityType, v1alpha1.LabelArch, v1alpha1.LabelInstanceType}

var planZones = []string{"zone-a", "zone-b", "zone-c"}

// GeneratePlan makes a plan case from a seed. The classes it produces, each
// in a share of the cases: groups mixing capacity types, architectures and
// instance types in a zone with spread, pod affinity and anti-affinity on
// those keys; chains of hostname affinity (from zero, and next to a first
// link that runs); hostname spread in groups with no node yet; node
// groups whose maxSize binds; preferences (preferred node affinity,
// ScheduleAnyway spread); DaemonSets; taints.
func GeneratePlan(seed int64) PlanCase {
	g := gen{r: rand.New(rand.NewSource(seed))}
	var c PlanCase
	for i := range 1 + g.r.Intn(3) {
		c.Groups = append(c.Groups, g.planGroup(i))
	}
	if g.chance(0.3) {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Image: "agent",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: g.qty("100m", "250m")}}}}
		if g.chance(0.5) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		c.DaemonSets = append(c.DaemonSets, ds)
	}
	for i := range g.r.Intn(4) {
		g.planNode(&c, fmt.Sprintf("node-%d", i))
	}
	apps := 1 + g.r.Intn(3)
	for a := range apps {
		g.planApp(&c, a, apps)
	}
	return c
}

// planGroup is a node group of 1-3 instance types (some arm64) offered in
// 1-3 zones on demand and, often, as spot too.
func (g gen) planGroup(i int) *v1alpha1.NodeGroup {
	name := fmt.Sprintf("g%d", i)
	ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ng.Spec.MaxSize = int32(1 + g.r.Intn(8))
	ng.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"pool": v1alpha1.LabelValue(name)}
	if g.chance(0.25) {
		ng.Spec.Template.Taints = []v1alpha1.NodeTaint{{Key: "dedicated", Value: name, Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	}
	zones := planZones[:1+g.r.Intn(3)]
	spot := g.chance(0.7)
	for t := range 1 + g.r.Intn(3) {
		cpu := []int64{2, 4, 8}[g.r.Intn(3)]
		it := v1alpha1.InstanceType{
			Name: fmt.Sprintf("%s-t%d", name, t), Architecture: g.pick("amd64", "amd64", "arm64"),
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(cpu*4<<30, resource.BinarySI),
				corev1.ResourcePods:   g.qty("4", "110", "110"),
			},
		}
		for _, z := range zones {
			price := 0.04 * float64(cpu) * (0.8 + 0.4*g.r.Float64())
			if g.chance(0.3) {
				price = 0.04 * float64(cpu) // equal prices, where preferences decide
			}
			it.Offerings = append(it.Offerings, v1alpha1.Offering{Zone: z, CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: fmt.Sprintf("%.4f", price)})
			if spot && g.chance(0.8) {
				it.Offerings = append(it.Offerings, v1alpha1.Offering{Zone: z, CapacityType: v1alpha1.CapacityTypeSpot, PricePerHour: fmt.Sprintf("%.4f", price*0.5)})
			}
		}
		ng.Spec.InstanceTypes = append(ng.Spec.InstanceTypes, it)
	}
	return ng
}

// planNode adds a Ready node of a random offering, labelled as berth
// labels the nodes it launches, and 0-3 pods bound to it (some with
// anti-affinity), plus the DaemonSet's pod where it runs.
func (g gen) planNode(c *PlanCase, name string) {
	ng := c.Groups[g.r.Intn(len(c.Groups))]
	it := &ng.Spec.InstanceTypes[g.r.Intn(len(ng.Spec.InstanceTypes))]
	off := &it.Offerings[g.r.Intn(len(it.Offerings))]
	n := nodeOf(ng, it, off, name)
	c.Nodes = append(c.Nodes, n)
	free := it.Capacity.Cpu().MilliValue()
	for _, ds := range c.DaemonSets {
		if runsOn(ds, n) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-" + name, Namespace: ds.Namespace, UID: types.UID("uid-agent-" + name)},
				Spec: *ds.Spec.Template.Spec.DeepCopy()}
			p.Spec.NodeName = name
			free -= p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
			c.Bound = append(c.Bound, p)
		}
	}
	for i := range g.r.Intn(4) {
		cpu := int64(250 * (1 + g.r.Intn(4)))
		if cpu > free {
			break
		}
		free -= cpu
		app := fmt.Sprintf("run%d", g.r.Intn(2))
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", app, name, i), Namespace: "default",
			UID: types.UID(fmt.Sprintf("uid-%s-%s-%d", app, name, i)), Labels: map[string]string{"app": app}}}
		p.Spec.NodeName = name
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}}}
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		if g.chance(0.3) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: g.pick(planKeys...), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick("app0", "app1", app)}}},
			}}}
		}
		p.Status.Phase = corev1.PodRunning
		c.Bound = append(c.Bound, p)
	}
}

// nodeOf is a Ready node of offering off, with the labels and taints berth
// gives the nodes it launches.
func nodeOf(ng *v1alpha1.NodeGroup, it *v1alpha1.InstanceType, off *v1alpha1.Offering, name string) *corev1.Node {
	labels := ng.NodeLabels(it, off)
	labels[hostKey] = name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{
		Capacity: it.Capacity.DeepCopy(), Allocatable: it.Capacity.DeepCopy(),
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, t := range ng.Spec.Template.Taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return n
}

// runsOn reports whether the DaemonSet runs a pod on node n: the pod
// tolerates every NoSchedule and NoExecute taint of n (its template's
// tolerations are all it has here; the generated nodes carry no taint
// the DaemonSet controller's own tolerations are for).
func runsOn(ds *appsv1.DaemonSet, n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for _, tol := range ds.Spec.Template.Spec.Tolerations {
			tolerated = tolerated || tol.ToleratesTaint(klog.Background(), &t, false)
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// planApp adds the pending replicas of app a of n apps, with a random mix
// of the constraints whose planning the fidelity test checks.
func (g gen) planApp(c *PlanCase, a, n int) {
	name := fmt.Sprintf("app%d", a)
	replicas := 1 + g.r.Intn(4)
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: g.qty("250m", "500m", "1", "2"), corev1.ResourceMemory: g.qty("256Mi", "1Gi")}}}}}
	self := map[string]string{"app": name}
	other := func() map[string]string {
		return map[string]string{"app": g.pick(fmt.Sprintf("app%d", g.r.Intn(n)), "run0", "run1")}
	}
	term := func(sel map[string]string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: g.pick(planKeys...), LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
	}
	aff := &corev1.Affinity{}
	switch {
	case a > 0 && g.chance(0.25):
		// A link of a chain: one replica next to the app before it.
		replicas = 1
		aff.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: hostKey, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", a-1)}}}}}
	case a == 0 && g.chance(0.1):
		// The first link of a chain whose first pod runs.
		replicas = 1
		aff.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: hostKey, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "run0"}}}}}
	case g.chance(0.25):
		sel := self
		if g.chance(0.3) {
			sel = other()
		}
		aff.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(sel)}}
	}
	if g.chance(0.35) {
		sel := self
		if g.chance(0.3) {
			sel = other()
		}
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(sel)}}
	}
	g.planPreferences(aff, &spec, self)
	if aff.PodAffinity != nil || aff.PodAntiAffinity != nil || aff.NodeAffinity != nil {
		spec.Affinity = aff
	}
	if g.chance(0.35) {
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: int32(1 + g.r.Intn(2)), TopologyKey: g.pick(planKeys...), WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: self}})
	}
	g.planSelection(c, &spec)
	for i := range replicas {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "default",
			UID: types.UID(fmt.Sprintf("uid-%s-%d", name, i)), Labels: self}, Spec: *spec.DeepCopy()}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		c.Pending = append(c.Pending, p)
	}
}

// planPreferences adds soft terms: preferred node affinity on a label the
// groups' options differ in, and ScheduleAnyway spread.
func (g gen) planPreferences(aff *corev1.Affinity, spec *corev1.PodSpec, self map[string]string) {
	if g.chance(0.25) {
		key, value := v1alpha1.LabelCapacityType, g.pick("spot", "on-demand")
		switch g.r.Intn(3) {
		case 0:
			key, value = v1alpha1.LabelArch, g.pick("amd64", "arm64")
		case 1:
			key, value = zoneKey, g.pick(planZones...)
		}
		aff.NodeAffinity = &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: int32(1 + g.r.Intn(100)), Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}}
	}
	if g.chance(0.2) {
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: g.pick(planKeys...), WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: self}})
	}
}

// planSelection adds a node selector on a label of the groups (pool,
// capacity type, architecture, zone) and tolerations of their taints.
func (g gen) planSelection(c *PlanCase, spec *corev1.PodSpec) {
	if g.chance(0.3) {
		k, v := "pool", fmt.Sprintf("g%d", g.r.Intn(len(c.Groups)))
		switch g.r.Intn(4) {
		case 0:
			k, v = v1alpha1.LabelCapacityType, g.pick("spot", "on-demand")
		case 1:
			k, v = v1alpha1.LabelArch, g.pick("amd64", "arm64")
		case 2:
			k, v = zoneKey, g.pick(planZones...)
		}
		spec.NodeSelector = map[string]string{k: v}
	}
	if g.chance(0.5) {
		spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
}
