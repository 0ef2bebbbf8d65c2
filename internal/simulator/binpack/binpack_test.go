package binpack_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/binpack"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// option is an on-demand instance type with the given cpu, 64Gi of memory
// and 110 pods.
func option(instanceType string, price float64, cpu string) *snapshot.Option {
	return &snapshot.Option{
		InstanceType: instanceType, CapacityType: "on-demand", Price: price, AllowedPods: 110,
		Allocatable: snapshot.FromList(corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse("64Gi"),
		}),
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			v1alpha1.LabelInstanceType: instanceType, v1alpha1.LabelCapacityType: "on-demand",
		}}},
	}
}

// template is node group group in zone zone with the given options.
func template(group, zone string, weight int32, taints []corev1.Taint, opts ...*snapshot.Option) *binpack.Template {
	labels := map[string]string{
		v1alpha1.LabelNodeGroup: group, v1alpha1.LabelZone: zone,
		v1alpha1.LabelHostname: "template-" + group + "-" + zone,
	}
	for _, o := range opts {
		maps.Copy(o.Node.Labels, labels)
	}
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: labels[v1alpha1.LabelHostname], Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	return &binpack.Template{
		Node:  &snapshot.Node{Node: obj, Taints: taints, NodeGroup: group, Flex: &snapshot.Flex{Options: opts}},
		Group: group, Weight: weight, Zone: zone,
	}
}

// maxNodes is a launcher that caps the node count of the groups it names.
type maxNodes map[string]int

func (m maxNodes) Allowed(s *snapshot.Snapshot, t *binpack.Template) ([]*snapshot.Option, string) {
	if limit, ok := m[t.Group]; ok && s.Group(t.Group).Nodes >= limit {
		return nil, fmt.Sprintf("node group at maxSize %d", limit)
	}
	return t.Node.Flex.Options, ""
}

// problem is a cluster and the node groups that can grow it.
type problem struct {
	nodes     []*corev1.Node
	bound     []*corev1.Pod
	templates []*binpack.Template
	limits    maxNodes
	nominated map[types.NamespacedName]string
	initial   []*binpack.Template
}

func (pr problem) input(t *testing.T, pending []*corev1.Pod) binpack.Input {
	t.Helper()
	sin := snapshot.Input{Pods: pr.bound, OptionKeys: []string{v1alpha1.LabelInstanceType, v1alpha1.LabelCapacityType}}
	for _, n := range pr.nodes {
		sin.Nodes = append(sin.Nodes, snapshot.NodeInput{Node: n, NodeGroup: n.Labels[v1alpha1.LabelNodeGroup]})
	}
	s, err := snapshot.New(sin)
	if err != nil {
		t.Fatal(err)
	}
	in := binpack.Input{
		Snapshot: s, Pending: pending, Templates: pr.templates, Launcher: pr.limits,
		Filters: predicates.Default(), NamePrefix: "new-", Nominated: pr.nominated, Initial: pr.initial,
	}
	binpack.InstallTemplates(s, pr.templates, in.Launcher)
	return in
}

func (pr problem) pack(t *testing.T, pending ...*corev1.Pod) (binpack.Input, *binpack.Result) {
	t.Helper()
	in := pr.input(t, pending)
	res, err := binpack.Pack(in)
	if err != nil {
		t.Fatal(err)
	}
	return in, res
}

// outcome is what a user reads in a plan: where each pod goes, the nodes
// bought ("name group/zone/type: pods"), what fits nowhere, and the price.
type outcome struct {
	On       map[string]string
	New      []string
	Unplaced []string
	Price    float64
}

func outcomeOf(res *binpack.Result) outcome {
	o := outcome{On: map[string]string{}}
	for _, pl := range res.Placements {
		o.On[pl.Pod.Name] = pl.Node.Name
	}
	for _, nn := range res.NewNodes {
		var pods []string
		for _, p := range nn.Pods {
			pods = append(pods, p.Name)
		}
		slices.Sort(pods)
		o.New = append(o.New, fmt.Sprintf("%s %s/%s/%s: %s", nn.Node.Name, nn.Template.Group, nn.Template.Zone, nn.Option.InstanceType, strings.Join(pods, ",")))
		o.Price += nn.Option.Price
	}
	for _, p := range res.Unplaced {
		o.Unplaced = append(o.Unplaced, p.Name)
	}
	return o
}

func pods(n int, prefix string, opts ...b.PodOption) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = b.Pod(fmt.Sprintf("%s-%d", prefix, i+1), opts...)
	}
	return out
}

// sameShape returns n nodes n-01, n-02, ... alike but for their names.
func sameShape(n int) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		out[i] = b.Node(fmt.Sprintf("n-%02d", i+1), "2", "8Gi")
	}
	return out
}

func TestPacking(t *testing.T) {
	general := func(opts ...*snapshot.Option) []*binpack.Template {
		return []*binpack.Template{template("general", "a", 0, nil, opts...)}
	}
	used := b.Pod("used", b.NodeName("old"), b.CPU("1"))
	for _, tc := range []struct {
		name    string
		problem problem
		pending []*corev1.Pod
		want    outcome
	}{{
		name:    "an existing node with room is used before a new node is opened",
		problem: problem{nodes: []*corev1.Node{b.Node("old", "2", "8Gi")}, bound: []*corev1.Pod{used}, templates: general(option("m", 1, "4"))},
		pending: pods(2, "p", b.CPU("1")),
		want:    outcome{On: map[string]string{"p-1": "old", "p-2": "new-1"}, New: []string{"new-1 general/a/m: p-2"}, Price: 1},
	}, {
		name:    "a planned node is filled before another is opened",
		problem: problem{templates: general(option("m", 1, "4"))},
		pending: pods(3, "p", b.CPU("1")),
		want:    outcome{On: map[string]string{"p-1": "new-1", "p-2": "new-1", "p-3": "new-1"}, New: []string{"new-1 general/a/m: p-1,p-2,p-3"}, Price: 1},
	}, {
		name:    "one pod gets the cheapest instance type that fits it",
		problem: problem{templates: general(option("large", 1.5, "4"), option("small", 1, "2"))},
		pending: pods(1, "p", b.CPU("1")),
		want:    outcome{On: map[string]string{"p-1": "new-1"}, New: []string{"new-1 general/a/small: p-1"}, Price: 1},
	}, {
		name:    "a planned node grows to a bigger type when that is cheaper per pod than a second node",
		problem: problem{templates: general(option("small", 1, "2"), option("large", 1.5, "4"))},
		pending: pods(3, "p", b.CPU("1")),
		want:    outcome{On: map[string]string{"p-1": "new-1", "p-2": "new-1", "p-3": "new-1"}, New: []string{"new-1 general/a/large: p-1,p-2,p-3"}, Price: 1.5},
	}, {
		name:    "a second small node is opened when the bigger type costs more per pod",
		problem: problem{templates: general(option("small", 1, "2"), option("large", 2.5, "4"))},
		pending: pods(3, "p", b.CPU("1")),
		want: outcome{On: map[string]string{"p-1": "new-1", "p-2": "new-1", "p-3": "new-2"},
			New: []string{"new-1 general/a/small: p-1,p-2", "new-2 general/a/small: p-3"}, Price: 2},
	}, {
		name:    "pods anti-affine to each other get a node each",
		problem: problem{templates: general(option("m", 1, "4"))},
		pending: pods(3, "web", b.CPU("1"), b.Labels("app", "web"), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "app", "web"))),
		want: outcome{On: map[string]string{"web-1": "new-1", "web-2": "new-2", "web-3": "new-3"},
			New: []string{"new-1 general/a/m: web-1", "new-2 general/a/m: web-2", "new-3 general/a/m: web-3"}, Price: 3},
	}, {
		name:    "a pod that needs a peer is placed once the peer is, next to it",
		problem: problem{templates: general(option("m", 1, "4"))},
		pending: []*corev1.Pod{
			b.Pod("client", b.CPU("1"), b.PodAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "app", "server"))),
			b.Pod("server", b.CPU("1"), b.Labels("app", "server")),
		},
		want: outcome{On: map[string]string{"client": "new-1", "server": "new-1"}, New: []string{"new-1 general/a/m: client,server"}, Price: 1},
	}, {
		name:    "a nominated pod goes to its nominated node, not the first that fits",
		problem: problem{nodes: []*corev1.Node{b.Node("first", "2", "8Gi"), b.Node("second", "2", "8Gi")}, nominated: map[types.NamespacedName]string{{Name: "p"}: "second"}},
		pending: []*corev1.Pod{b.Pod("p", b.Namespace(""), b.CPU("1"))},
		want:    outcome{On: map[string]string{"p": "second"}},
	}, {
		// Nodes of one shape (labels but the hostname, taints) are skipped
		// together once a class fails a static filter on one of them; a
		// pod that selects its node by hostname fails the first and must
		// still reach the last. (More than 16 nodes: past the exact
		// search, which tries every node.)
		name:    "a pod that selects its node by hostname reaches it past nodes of the same shape",
		problem: problem{nodes: sameShape(20)},
		pending: []*corev1.Pod{b.Pod("p", b.CPU("1"), b.NodeSelector(v1alpha1.LabelHostname, "n-20"))},
		want:    outcome{On: map[string]string{"p": "n-20"}},
	}, {
		name: "a pod that fails a static filter on nodes of one shape still lands on a node of another",
		problem: problem{nodes: append(sameShape(20),
			b.Node("tainted", "2", "8Gi", b.NodeTaint("dedicated", "x", corev1.TaintEffectNoSchedule), b.NodeLabels(v1alpha1.LabelZone, "a")),
			b.Node("zoned", "2", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "a")))},
		pending: []*corev1.Pod{
			b.Pod("spread", b.CPU("1"), b.Labels("app", "web"), b.Spread(v1alpha1.LabelZone, 1, "app", "web")),
			b.Pod("affine", b.CPU("1"), b.Labels("app", "db"), b.PodAffinity(b.AffinityTerm(v1alpha1.LabelZone, "app", "db"))),
		},
		want: outcome{On: map[string]string{"spread": "zoned", "affine": "zoned"}},
	}, {
		name:    "a higher priority pod takes the last room even if it sorts later by name",
		problem: problem{nodes: []*corev1.Node{b.Node("old", "2", "8Gi")}},
		pending: []*corev1.Pod{b.Pod("a-low", b.CPU("2")), b.Pod("z-high", b.CPU("2"), b.Priority(100))},
		want:    outcome{On: map[string]string{"z-high": "old"}, Unplaced: []string{"a-low"}},
	}, {
		name: "a higher weight group is chosen over a cheaper one until it is full",
		problem: problem{
			templates: []*binpack.Template{
				template("cheap", "a", 0, nil, option("m", 1, "4")),
				template("preferred", "a", 10, nil, option("m", 3, "4")),
			},
			limits: maxNodes{"preferred": 1},
		},
		pending: pods(2, "p", b.CPU("3")),
		want: outcome{On: map[string]string{"p-1": "new-1", "p-2": "new-2"},
			New: []string{"new-1 preferred/a/m: p-1", "new-2 cheap/a/m: p-2"}, Price: 4},
	}, {
		name:    "pods beyond a group's size stay unplaced",
		problem: problem{templates: general(option("m", 1, "4")), limits: maxNodes{"general": 1}},
		pending: pods(2, "p", b.CPU("3")),
		want:    outcome{On: map[string]string{"p-1": "new-1"}, New: []string{"new-1 general/a/m: p-1"}, Unplaced: []string{"p-2"}, Price: 1},
	}, {
		name: "a tainted group takes only the pods that tolerate it",
		problem: problem{templates: []*binpack.Template{
			template("large", "a", 0, []corev1.Taint{{Key: "size", Value: "large", Effect: corev1.TaintEffectNoSchedule}}, option("xl", 1, "4")),
		}},
		pending: []*corev1.Pod{b.Pod("premium", b.CPU("1"), b.Tolerate("size", "large", corev1.TaintEffectNoSchedule)), b.Pod("standard", b.CPU("1"))},
		want:    outcome{On: map[string]string{"premium": "new-1"}, New: []string{"new-1 large/a/xl: premium"}, Unplaced: []string{"standard"}, Price: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, res := tc.problem.pack(t, tc.pending...)
			if d := cmp.Diff(tc.want, outcomeOf(res)); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

// TestPlanDoesNotDependOnListingOrder: the controller lists pods from a
// cache and `berth plan` from a file; the same pods must give the same plan.
func TestPlanDoesNotDependOnListingOrder(t *testing.T) {
	templates := func() []*binpack.Template {
		return []*binpack.Template{
			template("general", "a", 0, nil, option("small", 1, "2"), option("large", 1.8, "4")),
			template("general", "b", 0, nil, option("small", 1.1, "2"), option("large", 1.9, "4")),
		}
	}
	var pending []*corev1.Pod
	pending = append(pending, pods(5, "web", b.CPU("500m"), b.Labels("app", "web"), b.Spread(v1alpha1.LabelZone, 1, "app", "web"))...)
	pending = append(pending, pods(3, "db", b.CPU("1500m"), b.Labels("app", "db"), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "app", "db")))...)
	pending = append(pending, pods(4, "batch", b.CPU("1"))...)
	_, forward := problem{templates: templates()}.pack(t, pending...)
	reversed := slices.Clone(pending)
	slices.Reverse(reversed)
	_, backward := problem{templates: templates()}.pack(t, reversed...)
	want := outcomeOf(forward)
	if len(want.On) != len(pending) {
		t.Fatalf("%d of %d pods placed: %+v", len(want.On), len(pending), want)
	}
	if d := cmp.Diff(want, outcomeOf(backward)); d != "" {
		t.Errorf("plan for the reversed listing (-forward +reversed):\n%s", d)
	}
}

// TestInitialNodesAreOpenedFirst: a node opened to bring a group to its
// minimum size is marked so, and pending pods use it before another opens.
func TestInitialNodesAreOpenedFirst(t *testing.T) {
	tp := template("general", "a", 0, nil, option("m", 1, "4"))
	_, res := problem{templates: []*binpack.Template{tp}, initial: []*binpack.Template{tp}}.pack(t, pods(2, "p", b.CPU("1"))...)
	if d := cmp.Diff(outcome{On: map[string]string{"p-1": "new-1", "p-2": "new-1"}, New: []string{"new-1 general/a/m: p-1,p-2"}, Price: 1}, outcomeOf(res)); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	if !res.NewNodes[0].Initial {
		t.Error("the node opened for the minimum size is not marked Initial")
	}
}

// TestUnreadablePodIsSkipped: a pod the simulator cannot read is reported,
// and the other pods are still planned.
func TestUnreadablePodIsSkipped(t *testing.T) {
	bad := b.Pod("bad", b.CPU("1"), b.PodAntiAffinity(corev1.PodAffinityTerm{
		TopologyKey:   v1alpha1.LabelHostname,
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}},
	}))
	_, res := problem{templates: []*binpack.Template{template("general", "a", 0, nil, option("m", 1, "4"))}}.pack(t, bad, b.Pod("good", b.CPU("1")))
	if len(res.Invalid) != 1 || res.Invalid[0].Pod.Name != "bad" || res.Invalid[0].Err == nil {
		t.Errorf("invalid pods: %+v, want bad with its error", res.Invalid)
	}
	if got := outcomeOf(res).On; !cmp.Equal(got, map[string]string{"good": "new-1"}) {
		t.Errorf("placements %v, want good on new-1", got)
	}
}

// TestExplainSaysWhyEachGroupRefuses: the per-group reasons behind the
// "why not" message of a pod that fits nowhere.
func TestExplainSaysWhyEachGroupRefuses(t *testing.T) {
	pr := problem{
		templates: []*binpack.Template{
			template("full", "a", 0, nil, option("m", 1, "4")),
			template("large", "a", 0, []corev1.Taint{{Key: "size", Value: "large", Effect: corev1.TaintEffectNoSchedule}}, option("xl", 1, "16")),
			template("medium", "a", 0, nil, option("m", 1, "2")),
		},
		limits: maxNodes{"full": 0},
	}
	pod := b.Pod("big", b.CPU("3"))
	in, res := pr.pack(t, pod)
	if len(res.Unplaced) != 1 {
		t.Fatalf("unplaced %v, want big", outcomeOf(res).Unplaced)
	}
	got := map[string]string{}
	for _, v := range binpack.Explain(in, res.Unplaced[0].Class) {
		got[v.Template.Group] = v.Status.Message()
	}
	want := map[string]string{
		"full":   "node group at maxSize 0",
		"large":  "untolerated taint size=large:NoSchedule",
		"medium": "insufficient cpu (needs 3, max 2)",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("reasons (-want +got):\n%s", d)
	}
}
