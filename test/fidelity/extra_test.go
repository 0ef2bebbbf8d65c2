package fidelity

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var extraCases = flag.Int("extracases", 2000, "number of extended random clusters")

// extra mutates a generated case with features gen.go does not produce
// (see TestExtendedFeaturesFidelity).
func extra(c *Case, seed int64) {
	g := gen{r: rand.New(rand.NewSource(seed * 7919))}
	for _, n := range c.Nodes {
		a := n.Status.Allocatable
		if g.chance(0.7) {
			a[corev1.ResourceEphemeralStorage] = g.qty("10Gi", "20Gi")
		}
		if g.chance(0.3) {
			a["hugepages-2Mi"] = g.qty("0", "512Mi", "1Gi")
		}
		if g.chance(0.1) {
			a["kubernetes.io/batch-cpu"] = g.qty("2", "4")
		}
		if g.chance(0.05) {
			delete(a, corev1.ResourcePods)
		}
		n.Status.Capacity = a
		// hostname label not equal to the node name, missing, or shared
		switch g.r.Intn(10) {
		case 0:
			delete(n.Labels, hostKey)
		case 1:
			n.Labels[hostKey] = "ip-" + n.Name
		case 2:
			n.Labels[hostKey] = "shared-host"
		case 3:
			n.Labels[zoneKey] = "" // empty value
		}
		for _, t := range []corev1.Taint{
			{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoExecute},
			{Key: "empty", Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		} {
			if g.chance(0.08) {
				n.Spec.Taints = append(n.Spec.Taints, t)
			}
		}
	}
	for _, p := range c.Pods {
		g.resourcesExtras(p, true)
		if g.chance(0.08) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		if g.chance(0.05) {
			p.Status.Phase = corev1.PodPending
		}
		if g.chance(0.1) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "side-ports", RestartPolicy: &always,
				Ports: []corev1.ContainerPort{g.port()}})
		}
		if g.chance(0.05) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init-ports",
				Ports: []corev1.ContainerPort{g.port()}})
		}
		if g.chance(0.1) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{g.spread()}
		}
	}
	p := c.Pod
	g.resourcesExtras(p, false)
	spec := &p.Spec
	if g.chance(0.1) {
		always := corev1.ContainerRestartPolicyAlways
		spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: "side-ports", RestartPolicy: &always,
			Ports: []corev1.ContainerPort{g.port()}})
	}
	if g.chance(0.25) {
		for _, t := range []corev1.Toleration{
			{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "empty", Operator: corev1.TolerationOpEqual},
			{Key: "empty", Operator: corev1.TolerationOpEqual, Value: "x"},
			{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		} {
			if g.chance(0.3) {
				spec.Tolerations = append(spec.Tolerations, t)
			}
		}
	}
	if g.chance(0.15) {
		if spec.Affinity == nil {
			spec.Affinity = &corev1.Affinity{}
		}
		ns := &corev1.NodeSelector{}
		for range 1 + g.r.Intn(3) {
			var t corev1.NodeSelectorTerm
			switch g.r.Intn(5) {
			case 0:
				t.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-" + g.pick("0", "1")}}}
			case 1:
				t.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-" + g.pick("0", "1", "2"), "node-3"}}}
				t.MatchExpressions = []corev1.NodeSelectorRequirement{g.nodeExpr()}
			case 2:
				// an empty term matches nothing
			case 3:
				t.MatchExpressions = []corev1.NodeSelectorRequirement{{Key: hostKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1", "ip-node-2", "shared-host"}}}
			default:
				t.MatchExpressions = []corev1.NodeSelectorRequirement{g.nodeExpr(), g.nodeExpr()}
			}
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, t)
		}
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}
	}
	for i := range spec.TopologySpreadConstraints {
		tsc := &spec.TopologySpreadConstraints[i]
		switch g.r.Intn(6) {
		case 0:
			tsc.MatchLabelKeys = []string{g.pick("app", "tier", "missing")}
		case 1:
			tsc.LabelSelector = &metav1.LabelSelector{}
		case 2:
			tsc.LabelSelector = nil
		case 3:
			tsc.MatchLabelKeys = []string{"app", "tier"}
			tsc.LabelSelector = &metav1.LabelSelector{}
		}
	}
	if g.chance(0.1) && len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: hostKey, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MatchLabelKeys: []string{"tier"}}}
	}
}

// bigRequests are requests of cpu, memory, ephemeral storage, hugepages
// and extended resources, large enough to run out.
func (g gen) bigRequests() corev1.ResourceList {
	rl := corev1.ResourceList{}
	if g.chance(0.7) {
		rl[corev1.ResourceCPU] = g.qty("100m", "1", "2", "3", "5")
	}
	if g.chance(0.6) {
		rl[corev1.ResourceMemory] = g.qty("128Mi", "1Gi", "3Gi", "6Gi")
	}
	if g.chance(0.3) {
		rl[corev1.ResourceEphemeralStorage] = g.qty("1Gi", "8Gi", "15Gi")
	}
	if g.chance(0.15) {
		rl["hugepages-2Mi"] = g.qty("256Mi", "768Mi")
	}
	if g.chance(0.05) {
		rl["kubernetes.io/batch-cpu"] = g.qty("1", "3")
	}
	if g.chance(0.05) {
		rl["example.com/gpu"] = g.qty("0")
	}
	return rl
}

// resourcesExtras gives a pod larger or more varied requests: more
// containers, init containers and sidecars in any order, overhead,
// pod-level resources, limits only; and an existing pod an in-place
// resize, pending, in progress or infeasible.
func (g gen) resourcesExtras(p *corev1.Pod, existing bool) {
	spec := &p.Spec
	always := corev1.ContainerRestartPolicyAlways
	if g.chance(0.3) {
		spec.Containers[0].Resources.Requests = g.bigRequests()
	}
	if g.chance(0.15) {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "second", Resources: corev1.ResourceRequirements{Requests: g.bigRequests()}})
	}
	if g.chance(0.2) {
		// ordering: regular init before and after sidecars
		ics := []corev1.Container{}
		for i := range 1 + g.r.Intn(3) {
			c := corev1.Container{Name: fmt.Sprintf("ic%d", i), Resources: corev1.ResourceRequirements{Requests: g.bigRequests()}}
			if g.chance(0.5) {
				c.RestartPolicy = &always
			}
			ics = append(ics, c)
		}
		spec.InitContainers = append(spec.InitContainers, ics...)
	}
	if g.chance(0.1) {
		spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: g.qty("128Mi", "1Gi"), corev1.ResourceEphemeralStorage: g.qty("1Gi")}
	}
	if g.chance(0.15) {
		// pod-level resources
		rl := corev1.ResourceList{}
		if g.chance(0.7) {
			rl[corev1.ResourceCPU] = g.qty("500m", "2", "3", "6")
		}
		if g.chance(0.6) {
			rl[corev1.ResourceMemory] = g.qty("1Gi", "3Gi", "7Gi")
		}
		if g.chance(0.2) {
			rl["hugepages-2Mi"] = g.qty("512Mi")
		}
		spec.Resources = &corev1.ResourceRequirements{Requests: rl}
	}
	if g.chance(0.05) {
		// limits only (no API defaulting here)
		spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: g.qty("2", "7")}}
	}
	if existing && g.chance(0.15) {
		// in-place resize: status differs from spec
		for _, ctr := range spec.Containers {
			st := corev1.ContainerStatus{Name: ctr.Name, AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: g.qty("100m", "3")},
				Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: g.qty("100m", "3"), corev1.ResourceMemory: g.qty("128Mi", "5Gi")}}}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
		}
		if spec.Resources != nil && g.chance(0.7) {
			p.Status.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: g.qty("100m", "7"), corev1.ResourceMemory: g.qty("128Mi", "7Gi")}}
			p.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: g.qty("100m", "7")}
		}
		if g.chance(0.3) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: g.pick(corev1.PodReasonInfeasible, corev1.PodReasonDeferred)})
		}
	}
}

// TestExtendedFeaturesFidelity compares berth's filters with
// kube-scheduler's on random clusters of Generate extended by extra: the
// features the base generator does not produce (pod-level resources and
// their in-place resizes, sidecars among init containers, overhead,
// ephemeral storage and hugepages, hostnames that are not the node's name,
// matchFields, NoExecute taints, spreads with matchLabelKeys and nil
// selectors, terminating and not yet started pods). Every disagreement
// fails the test.
func TestExtendedFeaturesFidelity(t *testing.T) {
	a := compareGenerated(t, *extraCases, func(seed int64) Case {
		c := Generate(seed)
		extra(&c, seed)
		return c
	})
	t.Logf("extended features: %d clusters, %d pod/node pairs (%d feasible for kube-scheduler), agreement %d/%d",
		*extraCases, a.pairs, a.feasible, a.agree, a.pairs)
	a.check(t)
}

// tcase is a hand-written case.
type tcase struct {
	name string
	c    Case
}

// mkNode is a Ready node with the allocatable cpu and memory.
func mkNode(name string, cpu, mem string, mut ...func(*corev1.Node)) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostKey: name}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, m := range mut {
		m(n)
	}
	return n
}

// mkPod is a pod of app=web with the requests, on node (running) or pending.
func mkPod(name, node string, req corev1.ResourceList, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{Requests: req}}}}}
	if node != "" {
		p.Status.Phase = corev1.PodRunning
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

// rl is a resource list of name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// defaultNamespaces are the namespaces of the hand-written cases.
func defaultNamespaces() []*corev1.Namespace {
	return []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "dev"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
	}
}

// runTable fails on every node where berth and kube-scheduler disagree.
func runTable(t *testing.T, cases []tcase) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range cases {
		c := tc.c
		if c.Namespaces == nil {
			c.Namespaces = defaultNamespaces()
		}
		want, got := verdicts(ctx, t, tc.name, c)
		for _, n := range c.Nodes {
			if name := n.Name; got.ok[name] != want.ok[name] {
				t.Errorf("%s node %s: kube-scheduler feasible=%v (%s), berth feasible=%v (%s)", tc.name, name, want.ok[name], want.why[name], got.ok[name], got.why[name])
			}
		}
	}
}

// TestResourcesFidelity: hand-written cases of what a pod counts as
// requesting, through both: in-place resizes of pod-level resources (in
// progress, infeasible) and of containers, and a regular init container
// before a sidecar.
func TestResourcesFidelity(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	cases := []tcase{
		{"pod-level resize in progress (status.resources above spec)", Case{
			Nodes: []*corev1.Node{mkNode("n1", "4", "8Gi")},
			Pods: []*corev1.Pod{mkPod("e1", "n1", nil, func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
				p.Status.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3")}
				p.Status.AllocatedResources = rl("cpu", "3")
			})},
			Pod: mkPod("in", "", rl("cpu", "2")),
		}},
		{"pod-level resize infeasible (spec above status)", Case{
			Nodes: []*corev1.Node{mkNode("n1", "4", "8Gi")},
			Pods: []*corev1.Pod{mkPod("e1", "n1", nil, func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3")}
				p.Status.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
				p.Status.AllocatedResources = rl("cpu", "1")
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
			})},
			Pod: mkPod("in", "", rl("cpu", "2")),
		}},
		{"pod-level resize, memory in progress", Case{
			Nodes: []*corev1.Node{mkNode("n1", "4", "8Gi")},
			Pods: []*corev1.Pod{mkPod("e1", "n1", nil, func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("memory", "1Gi")}
				p.Status.Resources = &corev1.ResourceRequirements{Requests: rl("memory", "6Gi")}
			})},
			Pod: mkPod("in", "", rl("memory", "4Gi")),
		}},
		{"container resize in progress", Case{
			Nodes: []*corev1.Node{mkNode("n1", "4", "8Gi")},
			Pods: []*corev1.Pod{mkPod("e1", "n1", rl("cpu", "1"), func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", AllocatedResources: rl("cpu", "3"), Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "3")}}}
			})},
			Pod: mkPod("in", "", rl("cpu", "2")),
		}},
		{"init after sidecar vs before", Case{
			Nodes: []*corev1.Node{mkNode("n1", "4", "8Gi")},
			Pod: mkPod("in", "", rl("cpu", "1"), func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{
					{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "3")}},
					{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}},
				}
			}),
		}},
	}
	runTable(t, cases)
}
