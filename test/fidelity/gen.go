// Package fidelity generates random (seeded) clusters and pods and compares
// berth's filters with kube-scheduler's Filter plugins on every node.
package fidelity

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Case is one cluster and one pod to place in it.
type Case struct {
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod // bound to nodes
	Namespaces []*corev1.Namespace
	Pod        *corev1.Pod
}

const (
	zoneKey         = corev1.LabelTopologyZone
	hostKey         = corev1.LabelHostname
	capacityTypeKey = "berth.dev/capacity-type"
	archKey         = corev1.LabelArchStable
	instanceTypeKey = corev1.LabelInstanceTypeStable
)

// topologyKeys are the keys of the generated terms and constraints.
var topologyKeys = []string{zoneKey, hostKey, "size", capacityTypeKey, archKey, instanceTypeKey}

type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g gen) chance(p float64) bool    { return g.r.Float64() < p }

func (g gen) qty(xs ...string) resource.Quantity { return resource.MustParse(g.pick(xs...)) }

// Generate makes a case from a seed.
func Generate(seed int64) Case {
	g := gen{r: rand.New(rand.NewSource(seed))}
	c := Case{Namespaces: []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "dev"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, // a namespace without labels
	}}
	for i := range 3 + g.r.Intn(6) {
		c.Nodes = append(c.Nodes, g.node(fmt.Sprintf("node-%d", i)))
	}
	for i := range g.r.Intn(14) {
		p := g.pod(fmt.Sprintf("existing-%d", i), true)
		p.Spec.NodeName = c.Nodes[g.r.Intn(len(c.Nodes))].Name
		p.Status.Phase = corev1.PodRunning
		c.Pods = append(c.Pods, p)
	}
	c.Pod = g.pod("incoming", false)
	if g.chance(0.05) {
		c.Pod.Spec.NodeName = c.Nodes[g.r.Intn(len(c.Nodes))].Name
	}
	return c
}

func (g gen) node(name string) *corev1.Node {
	labels := map[string]string{hostKey: name}
	if g.chance(0.9) {
		labels[zoneKey] = g.pick("zone-a", "zone-b", "zone-c")
	}
	if g.chance(0.7) {
		labels["size"] = g.pick("small", "large")
	}
	if g.chance(0.4) {
		labels["disk"] = "ssd"
	}
	if g.chance(0.6) {
		labels["cores"] = g.pick("2", "4", "8", "16")
	}
	// The labels a node group's options differ in, as topology keys.
	if g.chance(0.8) {
		labels[capacityTypeKey] = g.pick("spot", "on-demand")
	}
	if g.chance(0.8) {
		labels[archKey] = g.pick("amd64", "arm64")
	}
	if g.chance(0.8) {
		labels[instanceTypeKey] = g.pick("m-2", "m-4", "c-4")
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    g.qty("1", "2", "4", "8"),
		corev1.ResourceMemory: g.qty("2Gi", "4Gi", "8Gi"),
		corev1.ResourcePods:   g.qty("3", "10", "110"),
	}
	if g.chance(0.2) {
		alloc["example.com/gpu"] = g.qty("1", "2")
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, t := range []corev1.Taint{
		{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Effect: corev1.TaintEffectNoExecute},
		{Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule},
	} {
		if g.chance(0.2) {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	n.Spec.Unschedulable = g.chance(0.08)
	return n
}

func (g gen) labels() map[string]string {
	l := map[string]string{}
	if g.chance(0.85) {
		l["app"] = g.pick("web", "db", "api")
	}
	if g.chance(0.5) {
		l["tier"] = g.pick("fe", "be")
	}
	return l
}

func (g gen) pod(name string, existing bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.pick("default", "default", "prod", "plain"), UID: types.UID("uid-" + name), Labels: g.labels()},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{Requests: g.requests()}}}},
	}
	if existing {
		if g.chance(0.25) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.term()}}}
		}
		if g.chance(0.15) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{g.port()}
		}
		mergeLabelKeys(p)
		return p
	}
	g.incomingExtras(p)
	mergeLabelKeys(p)
	return p
}

// mergeLabelKeys does what kube-apiserver does when it admits a pod
// (KEP-3633): the values of the pod's labels named by a pod (anti-)affinity
// term's matchLabelKeys / mismatchLabelKeys are added to the term's
// labelSelector as In / NotIn requirements. kube-scheduler then reads only
// the selector; the pods here do not go through an API server.
func mergeLabelKeys(p *corev1.Pod) {
	a := p.Spec.Affinity
	if a == nil {
		return
	}
	var terms []*corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
	if a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
	for _, t := range terms {
		if t.LabelSelector == nil {
			continue
		}
		for _, k := range t.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				t.LabelSelector.MatchExpressions = append(t.LabelSelector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
		for _, k := range t.MismatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				t.LabelSelector.MatchExpressions = append(t.LabelSelector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}})
			}
		}
	}
}

func (g gen) requests() corev1.ResourceList {
	rl := corev1.ResourceList{}
	if g.chance(0.85) {
		rl[corev1.ResourceCPU] = g.qty("100m", "500m", "1", "1500m", "3")
	}
	if g.chance(0.7) {
		rl[corev1.ResourceMemory] = g.qty("128Mi", "1Gi", "3Gi")
	}
	if g.chance(0.1) {
		rl["example.com/gpu"] = g.qty("1", "2")
	}
	return rl
}

func (g gen) port() corev1.ContainerPort {
	return corev1.ContainerPort{ContainerPort: 80, HostPort: int32(8080 + g.r.Intn(2)),
		Protocol: corev1.Protocol(g.pick("TCP", "UDP")), HostIP: g.pick("", "", "10.0.0.1")}
}

func (g gen) incomingExtras(p *corev1.Pod) {
	spec := &p.Spec
	always := corev1.ContainerRestartPolicyAlways
	if g.chance(0.2) {
		spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: "init", Image: "i", Resources: corev1.ResourceRequirements{Requests: g.requests()}})
	}
	if g.chance(0.2) {
		spec.InitContainers = append([]corev1.Container{{Name: "sidecar", Image: "s", RestartPolicy: &always,
			Resources: corev1.ResourceRequirements{Requests: g.requests()}}}, spec.InitContainers...)
	}
	if g.chance(0.1) {
		spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: g.qty("100m", "1")}
	}
	if g.chance(0.3) {
		spec.NodeSelector = map[string]string{g.pick("size", "disk"): g.pick("small", "large", "ssd")}
	}
	if g.chance(0.15) {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[g.pick(capacityTypeKey, archKey)] = g.pick("spot", "arm64")
	}
	if g.chance(0.35) {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.nodeSelector()}}
	}
	if g.chance(0.4) {
		for _, t := range []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web"},
			{Key: "gpu", Operator: corev1.TolerationOpExists},
			{Operator: corev1.TolerationOpExists},
			{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		} {
			if g.chance(0.3) {
				spec.Tolerations = append(spec.Tolerations, t)
			}
		}
	}
	g.podAffinity(spec)
	if g.chance(0.35) {
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, g.spread())
		if g.chance(0.3) {
			spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, g.spread())
		}
	}
	if g.chance(0.1) {
		spec.Containers[0].Ports = []corev1.ContainerPort{g.port()}
	}
}

func (g gen) podAffinity(spec *corev1.PodSpec) {
	if !g.chance(0.45) {
		return
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if g.chance(0.5) {
		spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.term()}}
		if g.chance(0.2) {
			spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, g.term())
		}
	}
	if g.chance(0.5) {
		spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.term()}}
	}
}

func (g gen) nodeSelector() *corev1.NodeSelector {
	ns := &corev1.NodeSelector{}
	for range 1 + g.r.Intn(2) {
		var term corev1.NodeSelectorTerm
		for range 1 + g.r.Intn(2) {
			term.MatchExpressions = append(term.MatchExpressions, g.nodeExpr())
		}
		if g.chance(0.1) {
			term.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-" + g.pick("0", "1", "2")}}}
		}
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
	}
	return ns
}

func (g gen) nodeExpr() corev1.NodeSelectorRequirement {
	switch g.r.Intn(6) {
	case 0:
		return corev1.NodeSelectorRequirement{Key: g.pick(zoneKey, "size"), Operator: corev1.NodeSelectorOpIn, Values: []string{g.pick("zone-a", "large"), g.pick("zone-b", "small")}}
	case 1:
		return corev1.NodeSelectorRequirement{Key: g.pick(zoneKey, "size"), Operator: corev1.NodeSelectorOpNotIn, Values: []string{g.pick("zone-a", "large")}}
	case 2:
		return corev1.NodeSelectorRequirement{Key: g.pick("disk", zoneKey), Operator: corev1.NodeSelectorOpExists}
	case 3:
		return corev1.NodeSelectorRequirement{Key: g.pick("disk", "size"), Operator: corev1.NodeSelectorOpDoesNotExist}
	case 4:
		return corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpGt, Values: []string{g.pick("2", "4", "8")}}
	default:
		return corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpLt, Values: []string{g.pick("4", "8", "16")}}
	}
}

func (g gen) selector() *metav1.LabelSelector {
	if g.chance(0.6) {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick("web", "db", "api")}}
	}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	op := ops[g.r.Intn(len(ops))]
	req := metav1.LabelSelectorRequirement{Key: g.pick("app", "tier"), Operator: op}
	if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
		req.Values = []string{g.pick("web", "db", "fe")}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}
}

func (g gen) term() corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{LabelSelector: g.selector(), TopologyKey: g.pick(topologyKeys...)}
	switch g.r.Intn(7) {
	case 0:
		t.Namespaces = []string{g.pick("default", "prod", "plain")}
	case 1:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": g.pick("dev", "prod")}}
	case 2:
		t.NamespaceSelector = &metav1.LabelSelector{}
	case 3: // both: the union of the listed namespaces and the selected ones
		t.Namespaces = []string{g.pick("default", "prod", "plain")}
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": g.pick("dev", "prod")}}
	case 4: // an empty namespace list and an empty selector: all namespaces
		t.Namespaces = []string{}
		t.NamespaceSelector = &metav1.LabelSelector{}
	}
	if g.chance(0.15) {
		// matchLabelKeys / mismatchLabelKeys take the incoming pod's values.
		if g.chance(0.5) {
			t.MatchLabelKeys = []string{g.pick("app", "tier")}
		} else {
			t.MismatchLabelKeys = []string{g.pick("app", "tier")}
		}
	}
	return t
}

func (g gen) spread() corev1.TopologySpreadConstraint {
	c := corev1.TopologySpreadConstraint{
		MaxSkew: int32(1 + g.r.Intn(2)), TopologyKey: g.pick(topologyKeys...),
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: g.selector(),
	}
	if g.chance(0.1) {
		c.WhenUnsatisfiable = corev1.ScheduleAnyway
	}
	if g.chance(0.25) {
		n := int32(2 + g.r.Intn(3))
		c.MinDomains = &n
	}
	if g.chance(0.2) {
		p := corev1.NodeInclusionPolicy(g.pick("Honor", "Ignore"))
		c.NodeAffinityPolicy = &p
	}
	if g.chance(0.2) {
		p := corev1.NodeInclusionPolicy(g.pick("Honor", "Ignore"))
		c.NodeTaintsPolicy = &p
	}
	return c
}
