package scaledown_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

func group(name string, mutate ...func(*v1alpha1.NodeGroup)) *v1alpha1.NodeGroup {
	ng := b.NodeGroup(name, b.Size(0, 100))
	ng.UID = types.UID("uid-group-" + name)
	all := intstr.FromString("100%") // one rule at a time; TestBudget tests the budget
	ng.Spec.Disruption.Budget = &all
	for _, m := range mutate {
		m(ng)
	}
	return ng
}

// node is a 4-cpu, 16Gi node berth launched for ng.
func node(name string, ng *v1alpha1.NodeGroup, opts ...b.NodeOption) *corev1.Node {
	return b.Node(name, "4", "16Gi", append([]b.NodeOption{b.LaunchedBy(ng)}, opts...)...)
}

// app is a pod of a Deployment on a node.
func app(name, on, cpu string, opts ...b.PodOption) *corev1.Pod {
	return b.Pod(name, append([]b.PodOption{b.NodeName(on), b.CPU(cpu), b.OwnedBy("ReplicaSet", "web"), b.Labels("app", "web"), b.Phase(corev1.PodRunning)}, opts...)...)
}

func pdb(name string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-pdb-" + name)},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

// outcome is what a user reads of a plan: the nodes removed, and per
// staying node the reason (and the pod, when one is named).
type outcome struct {
	removed []string
	blocked map[string]string
}

func run(t *testing.T, in scaledown.Input) outcome {
	t.Helper()
	plan, err := scaledown.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	// As the controller plans: on a model kept from round to round, built
	// by the first round and brought up to date by the second; nothing a
	// round does may show in the next.
	base := snapshot.NewBase()
	for round := range 2 {
		onBase := in
		onBase.Base = base
		again, err := scaledown.Run(onBase)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(plan, again); diff != "" {
			t.Fatalf("round %d on a snapshot.Base: the plan differs (-from scratch +on the base):\n%s", round, diff)
		}
	}
	out := outcome{blocked: map[string]string{}}
	for _, r := range plan.Remove {
		out.removed = append(out.removed, r.Node)
	}
	slices.Sort(out.removed)
	for _, bl := range plan.Blocked {
		s := string(bl.Reason)
		if bl.Pod != nil {
			s += " " + bl.Pod.String()
		}
		out.blocked[bl.Node] = s
	}
	return out
}

func TestPlan(t *testing.T) {
	g := group("g")
	tests := []struct {
		name string
		in   scaledown.Input
		want outcome
	}{
		{
			name: "an empty node goes, a full node whose pods fit nowhere else stays",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)},
				Pods: []*corev1.Pod{app("busy", "b", "3500m"), b.Pod("ds", b.NodeName("a"), b.CPU("100m"), b.OwnedBy("DaemonSet", "agent"))}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{"b": "NoHome default/busy"}},
		},
		{
			name: "an empty standby node (booted, not suspended yet) is the standby controller's: it neither goes nor is reported",
			in:   scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g, b.NodeTaint(v1alpha1.TaintStandby, "true", corev1.TaintEffectNoSchedule))}},
			want: outcome{blocked: map[string]string{}},
		},
		{
			name: "a workload with a companion is charged its companion where it moves (it is made again pending, and its companion with it)",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g),
				node("b", g, b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true"))},
				Pods: []*corev1.Pod{app("w", "a", "1", b.Labels(v1alpha1.LabelCompanionShareKey, "vol"),
					b.Annotation(v1alpha1.AnnotationCompanionRequests, `{"cpu":"1"}`)), app("p", "a", "1600m"), app("busy", "b", "500m")}},
			// b has 3.5 cpu free: the workload and its companion take 2,
			// and p (1.6) no longer fits.
			want: outcome{blocked: map[string]string{"a": "NoHome default/p", "b": "NodeDoNotDisrupt"}},
		},
		{
			name: "of two half-used nodes the less used goes and its pods move to the other",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)},
				Pods: []*corev1.Pod{app("small", "a", "1"), app("large", "b", "2")}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{"b": "NoHome default/large"}},
		},
		{
			name: "an empty node launched to replace others stays while they are there (its pods are still to come)",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{
				node("old", g, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "new")), node("new", g)},
				Pods: []*corev1.Pod{app("web-1", "old", "1")}},
			want: outcome{blocked: map[string]string{}},
		},
		{
			name: "a replacement still booting keeps the room of the pods it was launched for: no removal moves its pods there",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{
				node("old", g, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "new")), node("new", g), node("b", g)},
				Pods: []*corev1.Pod{app("web-1", "old", "3"), app("web-2", "b", "1500m")}},
			want: outcome{blocked: map[string]string{"b": "NoHome default/web-2"}},
		},
		{
			name: "an empty node that a pending pod is nominated to stays (berth launched it for the pod, which is on its way)",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)},
				Nominated: []*corev1.Pod{func() *corev1.Pod {
					p := b.Pod("coming", b.CPU("1"))
					p.Status.NominatedNodeName = "a"
					return p
				}()}},
			want: outcome{removed: []string{"b"}, blocked: map[string]string{"a": "PodNominated default/coming"}},
		},
		{
			name: "DaemonSet, mirror and finished pods go with their node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g)}, Pods: []*corev1.Pod{
				b.Pod("ds", b.NodeName("a"), b.CPU("1"), b.OwnedBy("DaemonSet", "agent")),
				b.Pod("static", b.NodeName("a"), b.CPU("1"), b.Annotation(corev1.MirrorPodAnnotationKey, "x")),
				b.Pod("done", b.NodeName("a"), b.CPU("1"), b.Phase(corev1.PodSucceeded)),
			}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{}},
		},
		{
			name: "a headroom placeholder holds its node like a workload pod when it fits nowhere else",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g)}, Pods: []*corev1.Pod{
				b.Pod("placeholder", b.NodeName("a"), b.CPU("1"), b.Namespace(v1alpha1.SystemNamespace), b.OwnedBy("ReplicaSet", "headroom-x"),
					b.Labels(v1alpha1.LabelHeadroomRole, "placeholder")),
			}},
			want: outcome{blocked: map[string]string{"a": "Headroom berth-system/placeholder"}},
		},
		{
			name: "a bare pod keeps its node, named in the reason",
			in:   scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)}, Pods: []*corev1.Pod{b.Pod("bare", b.NodeName("a"), b.CPU("1"))}},
			want: outcome{removed: []string{"b"}, blocked: map[string]string{"a": "NotReplicated default/bare"}},
		},
		{
			name: "a bare pod annotated safe-to-evict moves",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g, group("other")}, Nodes: []*corev1.Node{node("a", g), b.Node("z", "4", "16Gi")},
				Pods: []*corev1.Pod{b.Pod("bare", b.NodeName("a"), b.CPU("1"), b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true"))}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{}},
		},
		{
			name: "do-not-disrupt pods of berth, Karpenter and Ocean, and not-safe-to-evict, keep their nodes",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g), node("c", g), node("d", g), b.Node("z", "16", "64Gi")},
				Pods: []*corev1.Pod{
					app("berth", "a", "1", b.Annotation("berth.dev/do-not-disrupt", "true")),
					app("karpenter", "b", "1", b.Annotation("karpenter.sh/do-not-disrupt", "true")),
					app("ocean", "c", "1", b.Labels("spotinst.io/restrict-scale-down", "true")),
					app("ca", "d", "1", b.Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")),
				}},
			want: outcome{blocked: map[string]string{"a": "DoNotDisrupt default/berth", "b": "DoNotDisrupt default/karpenter",
				"c": "DoNotDisrupt default/ocean", "d": "NotSafeToEvict default/ca"}},
		},
		{
			name: "a node annotated do-not-disrupt stays",
			in:   scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g, b.NodeAnnotation("berth.dev/do-not-disrupt", "true"))}},
			want: outcome{blocked: map[string]string{"a": "NodeDoNotDisrupt"}},
		},
		{
			name: "local storage and kube-system pods without a PDB keep their nodes",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g), b.Node("z", "16", "64Gi")},
				Pods: []*corev1.Pod{app("scratch", "a", "1", b.EmptyDir("cache")), app("dns", "b", "1", b.Namespace("kube-system"))}},
			want: outcome{blocked: map[string]string{"a": "LocalStorage default/scratch", "b": "SystemPodWithoutPDB kube-system/dns"}},
		},
		{
			name: "a PDB that allows no disruption keeps the node; one that allows one lets one of two nodes go",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g, group("g2")}, Nodes: []*corev1.Node{node("a", g), node("b", g), b.Node("z", "16", "64Gi")},
				Pods: []*corev1.Pod{app("w1", "a", "1"), app("w2", "b", "1")}, PDBs: []*policyv1.PodDisruptionBudget{pdb("web", 1)}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{"b": "PodDisruptionBudget default/w2"}},
		},
		{
			name: "minSize keeps the last node",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{group("min", func(ng *v1alpha1.NodeGroup) { ng.Spec.MinSize = 1 })},
				Nodes: []*corev1.Node{node("a", group("min"))}},
			want: outcome{blocked: map[string]string{"a": "MinSize"}},
		},
		{
			name: "WhenEmpty keeps a node with workload even when its pods could move",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{group("we", func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationWhenEmpty
			})}, Nodes: []*corev1.Node{node("a", group("we")), b.Node("z", "16", "64Gi")}, Pods: []*corev1.Pod{app("w", "a", "1")}},
			want: outcome{blocked: map[string]string{"a": "ConsolidationPolicy"}},
		},
		{
			name: "Never removes nothing",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{group("nv", func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever
			})}, Nodes: []*corev1.Node{node("a", group("nv"))}},
			want: outcome{blocked: map[string]string{}},
		},
		{
			name: "a node without berth's owner mark is not berth's to remove",
			in:   scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g, b.NodeAnnotation(v1alpha1.AnnotationLaunchedBy, "uid-of-another-group"))}},
			want: outcome{blocked: map[string]string{"a": "NotLaunchedByBerth"}},
		},
		{
			name: "a node berth is draining already is no home and counts against the budget",
			in: scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{group("one", func(ng *v1alpha1.NodeGroup) {
				one := intstr.FromInt32(1)
				ng.Spec.Disruption.Budget = &one
			})}, Nodes: []*corev1.Node{
				node("a", group("one"), b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)), node("b", group("one"))}},
			want: outcome{blocked: map[string]string{"b": "DisruptionBudget"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.in)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoHomeOnANodeThatIsGoingOrDown: a pod may move only to a node
// kube-scheduler will put it on and that stays: not one of berth's nodes
// NotReady past the launch grace (it was never going to boot), nor one
// that came up once and went down, however young; not a node being
// deleted. A node still booting is a home.
func TestNoHomeOnANodeThatIsGoingOrDown(t *testing.T) {
	g := group("g")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	created := func(at time.Time) b.NodeOption {
		return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(at) }
	}
	unreachable := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	}
	deleting := func(n *corev1.Node) {
		n.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
		n.Finalizers = []string{"example.com/hold"}
	}
	tests := []struct {
		name string
		home *corev1.Node
		want outcome
	}{
		{name: "a node of berth's unreachable for hours is no home",
			home: node("home", g, created(now.Add(-3*time.Hour)), unreachable),
			want: outcome{blocked: map[string]string{"a": "NoHome default/w"}}},
		// Up once (labelled initialized), it is down, not booting.
		{name: "a node of berth's that came up and went down five minutes after its launch is no home",
			home: node("home", g, created(now.Add(-5*time.Minute)), unreachable),
			want: outcome{blocked: map[string]string{"a": "NoHome default/w"}}},
		{name: "a node of berth's not Ready since its launch past the launch grace is no home",
			home: node("home", g, created(now.Add(-time.Hour)), b.NotReady(), b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)),
			want: outcome{blocked: map[string]string{"a": "NoHome default/w"}}},
		{name: "a node of berth's still booting is a home",
			home: node("home", g, created(now.Add(-time.Minute)), b.Booting(), b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)),
			want: outcome{removed: []string{"a"}, blocked: map[string]string{}}},
		{name: "a node being deleted is no home",
			home: b.Node("home", "4", "16Gi", deleting),
			want: outcome{blocked: map[string]string{"a": "NoHome default/w"}}},
		{name: "a node of berth's being deleted is no home",
			home: node("home", g, deleting),
			want: outcome{blocked: map[string]string{"a": "NoHome default/w"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g, created(now.Add(-time.Hour))), tt.home},
				Pods: []*corev1.Pod{app("w", "a", "1")}, Now: now, LaunchGrace: scaleup.DefaultLaunchGrace}
			got := run(t, in)
			delete(got.blocked, "home")
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOptOutsOfEveryKind: a running pod marked do-not-disrupt keeps its
// node whatever kind it is (a DaemonSet's or a static pod, as Karpenter
// has it); a finished one does not. A node annotated by Karpenter's or
// Cluster Autoscaler's opt-out stays. A pod two PodDisruptionBudgets
// cover keeps its node: the Eviction API refuses it.
func TestOptOutsOfEveryKind(t *testing.T) {
	g := group("g")
	dnd := b.Annotation("karpenter.sh/do-not-disrupt", "true")
	twoPDBs := []*policyv1.PodDisruptionBudget{pdb("web", 5), pdb("web-too", 5)}
	tests := []struct {
		name string
		in   scaledown.Input
		want outcome
	}{
		{name: "a DaemonSet pod marked do-not-disrupt keeps its node",
			in:   scaledown.Input{Pods: []*corev1.Pod{b.Pod("agent", b.NodeName("a"), b.CPU("100m"), b.OwnedBy("DaemonSet", "agent"), dnd)}},
			want: outcome{blocked: map[string]string{"a": "DoNotDisrupt default/agent"}}},
		{name: "a static pod marked berth.dev/do-not-disrupt keeps its node",
			in: scaledown.Input{Pods: []*corev1.Pod{b.Pod("static", b.NodeName("a"), b.CPU("100m"), b.Annotation(corev1.MirrorPodAnnotationKey, "x"),
				b.Annotation(v1alpha1.AnnotationDoNotDisrupt, "true"))}},
			want: outcome{blocked: map[string]string{"a": "DoNotDisrupt default/static"}}},
		{name: "a finished pod marked do-not-disrupt does not",
			in:   scaledown.Input{Pods: []*corev1.Pod{b.Pod("done", b.NodeName("a"), b.CPU("100m"), b.OwnedBy("Job", "j"), b.Phase(corev1.PodSucceeded), dnd)}},
			want: outcome{removed: []string{"a"}, blocked: map[string]string{}}},
		{name: "a node annotated karpenter.sh/do-not-disrupt stays",
			in:   scaledown.Input{Nodes: []*corev1.Node{node("a", g, b.NodeAnnotation("karpenter.sh/do-not-disrupt", "true"))}},
			want: outcome{blocked: map[string]string{"a": "NodeDoNotDisrupt"}}},
		{name: "a node annotated cluster-autoscaler.kubernetes.io/scale-down-disabled stays",
			in:   scaledown.Input{Nodes: []*corev1.Node{node("a", g, b.NodeAnnotation("cluster-autoscaler.kubernetes.io/scale-down-disabled", "true"))}},
			want: outcome{blocked: map[string]string{"a": "NodeDoNotDisrupt"}}},
		{name: "a pod two PodDisruptionBudgets cover keeps its node",
			in:   scaledown.Input{Pods: []*corev1.Pod{app("w", "a", "1")}, PDBs: twoPDBs},
			want: outcome{blocked: map[string]string{"a": "PodDisruptionBudget default/w"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.NodeGroups = []*v1alpha1.NodeGroup{g}
			if in.Nodes == nil {
				in.Nodes = []*corev1.Node{node("a", g)}
			}
			in.Nodes = append(in.Nodes, b.Node("z", "16", "64Gi"))
			if diff := cmp.Diff(tt.want, run(t, in), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBudgetCountsWhatIsDownOrGoing: of 10 empty nodes with a budget of
// one, none goes while another node of the group is being deleted or
// went NotReady (Karpenter counts both); a NotReady node does not hold
// back repair. A budget of 0 or "0%" removes nothing; a group being
// deleted still goes one node at a time.
func TestBudgetCountsWhatIsDownOrGoing(t *testing.T) {
	launchedAt := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	budget := func(v string) func(*v1alpha1.NodeGroup) {
		return func(ng *v1alpha1.NodeGroup) {
			b := intstr.Parse(v)
			ng.Spec.Disruption.Budget = &b
		}
	}
	tests := []struct {
		name   string
		budget string
		other  []b.NodeOption
		delete bool
		// now plans at launchedAt with a max provision time of 15 minutes.
		now  bool
		want int
	}{
		{name: "a budget of one removes one", budget: "1", want: 1},
		{name: "a node being deleted uses the budget", budget: "1", other: []b.NodeOption{func(n *corev1.Node) {
			n.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			n.Finalizers = []string{"example.com/hold"}
		}}, want: 0},
		{name: "a node that went NotReady uses the budget", budget: "1", other: []b.NodeOption{b.NotReady()}, want: 0},
		{name: "a budget of 0 removes nothing", budget: "0", want: 0},
		{name: "a budget of 0% removes nothing", budget: "0%", want: 0},
		{name: "a group being deleted with a budget of 0 goes one node at a time", budget: "0", delete: true, want: 1},
		{name: "a group being deleted goes on past a node of it that went NotReady", budget: "1", delete: true, other: []b.NodeOption{b.NotReady()}, want: 1},
		{name: "a suspended standby node (not Ready by design) does not use the budget", budget: "1",
			other: []b.NodeOption{b.NotReady(), b.NodeTaint(v1alpha1.TaintStandby, "true", corev1.TaintEffectNoSchedule)}, want: 1},
		{name: "a node whose replacement's launch is recorded (a restart before its mark) uses the budget", budget: "1", now: true,
			other: []b.NodeOption{b.NodeAnnotation(v1alpha1.AnnotationReplacementLaunching, launchedAt.Add(-time.Minute).Format(time.RFC3339))}, want: 0},
		{name: "a launch recorded longer ago than the max provision time does not", budget: "1", now: true,
			other: []b.NodeOption{b.NodeAnnotation(v1alpha1.AnnotationReplacementLaunching, launchedAt.Add(-20*time.Minute).Format(time.RFC3339))}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ng := group("ten", budget(tt.budget))
			if tt.delete {
				ng.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			var nodes []*corev1.Node
			for i := range 10 {
				nodes = append(nodes, node(fmt.Sprintf("n%02d", i), ng))
			}
			if tt.other != nil {
				nodes = append(nodes, node("other", ng, append(tt.other, b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true"))...))
			}
			in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes}
			if tt.now {
				in.Now, in.LaunchGrace = launchedAt, 15*time.Minute
			}
			got := run(t, in)
			if len(got.removed) != tt.want {
				t.Errorf("%d nodes removed (%v), want %d", len(got.removed), got.removed, tt.want)
			}
		})
	}
}

// TestBudget: of 25 empty nodes the default budget (10 %, rounded up)
// removes 3 at once, a budget of "5" removes 5, "1%" still 1.
func TestBudget(t *testing.T) {
	for budget, want := range map[string]int{"": 3, "5": 5, "1%": 1} {
		t.Run("budget="+budget, func(t *testing.T) {
			ng := group("many")
			ng.Spec.Disruption.Budget = nil
			if budget != "" {
				v := intstr.Parse(budget)
				ng.Spec.Disruption.Budget = &v
			}
			var nodes []*corev1.Node
			for i := range 25 {
				nodes = append(nodes, node(fmt.Sprintf("n%02d", i), ng))
			}
			got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: nodes})
			if len(got.removed) != want {
				t.Errorf("%d nodes removed, want %d", len(got.removed), want)
			}
		})
	}
}

// TestHeadroomStays: a headroom unit of 3.5 cpu sits on the empty node b
// (a has only 3 cpu free). Removing b would leave the unit without a
// home: b stays, naming the unit. Without the unit b goes.
func TestHeadroomStays(t *testing.T) {
	g := group("hr")
	nodes := []*corev1.Node{node("a", g), node("b", g)}
	pods := []*corev1.Pod{app("w", "a", "1")}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "spare"}}
	unit := headroom.VirtualPods(h, headroom.Resolved{Count: 1, Shape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: b.Node("x", "3500m", "1").Status.Capacity[corev1.ResourceCPU]}}})
	got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: nodes, Pods: pods, Virtual: unit})
	if len(got.removed) != 0 || !strings.HasPrefix(got.blocked["b"], "Headroom") {
		t.Errorf("with a headroom unit on b: removed %v, b blocked %q; want nothing removed and b kept for the headroom", got.removed, got.blocked["b"])
	}
	got = run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: nodes, Pods: pods})
	if !slices.Equal(got.removed, []string{"b"}) {
		t.Errorf("without headroom: removed %v, want [b]", got.removed)
	}
}

// TestEvictionsNameThePodsAndWhereTheyGo: a removal lists the pods the
// drain evicts and the node each is expected on; the headroom unit that
// also needs a home on another node is not a pod and is not evicted.
func TestEvictionsNameThePodsAndWhereTheyGo(t *testing.T) {
	g := group("ev")
	nodes := []*corev1.Node{node("a", g), node("b", g)}
	pods := []*corev1.Pod{app("w", "a", "1"), app("big", "b", "2")}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "spare"}}
	unit := headroom.VirtualPods(h, headroom.Resolved{Count: 1, Shape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: b.Node("x", "500m", "1").Status.Capacity[corev1.ResourceCPU]}}})
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: nodes, Pods: pods, Virtual: unit})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range plan.Remove {
		for _, m := range r.Evict {
			got = append(got, r.Node+": "+m.Pod.String()+" -> "+m.To)
		}
	}
	if diff := cmp.Diff([]string{"a: default/w -> b"}, got); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
}

// TestRecheck: a node being drained (after a restart, say) may go on while
// its remaining pods have a home, even if their PDB makes them wait now;
// it must stop when a pod has no home any more.
func TestRecheck(t *testing.T) {
	g := group("re")
	draining := node("a", g, b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule))
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{draining, node("b", g)},
		Pods: []*corev1.Pod{app("w", "a", "1")}, PDBs: []*policyv1.PodDisruptionBudget{pdb("web", 0)}}
	if bl, err := scaledown.Recheck(in, "a"); err != nil || bl != nil {
		t.Errorf("a drain whose pod fits on b: %+v %v, want it to go on", bl, err)
	}
	in.Pods = append(in.Pods, app("big", "b", "3500m"))
	if bl, err := scaledown.Recheck(in, "a"); err != nil || bl == nil || bl.Reason != scaledown.ReasonNoHome {
		t.Errorf("a drain whose pod fits nowhere now: %+v %v, want NoHome", bl, err)
	}
}

// TestARecheckLeavesTheRoomOfOtherReplacementsAndDrainsAlone: the pods of
// a node being replaced go to its own replacement, sized for them, or stay
// where they are while it boots (it may have no Node yet): they take no
// room a drain or another replacement counts on. And a pod whose
// ReadWriteOncePod claim only it uses finds a home (its own use does not
// count against it).
func TestARecheckLeavesTheRoomOfOtherReplacementsAndDrainsAlone(t *testing.T) {
	g := group("re")
	replaced := func(name, by string) *corev1.Node {
		return node(name, g, b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, by))
	}
	draining := b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)
	t.Run("another replacement still launching has no Node yet", func(t *testing.T) {
		in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{replaced("a", "ra"), node("ra", g), replaced("c", "rc")},
			Pods: []*corev1.Pod{app("web-a", "a", "3"), app("web-c", "c", "3")}}
		if bl, err := scaledown.Recheck(in, "a"); err != nil || bl != nil {
			t.Errorf("a, whose replacement ra is Ready: %+v %v; want its drain to go on (web-c waits for rc, not ra)", bl, err)
		}
	})
	t.Run("a drain and a replacement", func(t *testing.T) {
		in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("d", g, draining), node("e", g), replaced("a", "ra"), node("ra", g)},
			Pods: []*corev1.Pod{app("web-d", "d", "3"), app("small-e", "e", "1"), app("web-a1", "a", "2"), app("web-a2", "a", "2")}}
		if bl, err := scaledown.Recheck(in, "d"); err != nil || bl != nil {
			t.Errorf("d, whose pod fits on e: %+v %v; want its drain to go on (a's pods go to ra)", bl, err)
		}
	})
	t.Run("a ReadWriteOncePod pod of a drained node", func(t *testing.T) {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}}}
		withClaim := func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
		}
		in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("d", g, draining), node("e", g), node("f", g)},
			Pods:   []*corev1.Pod{app("w", "d", "3", withClaim), app("web-e", "e", "500m"), app("web-f", "f", "3")},
			Claims: []*corev1.PersistentVolumeClaim{claim}}
		got := run(t, in)
		if slices.Contains(got.removed, "e") {
			t.Errorf("removed %v: e's room is the only home of d's pod w", got.removed)
		}
	})
}

// TestReplaceByACheaperNode: three 2-cpu nodes at 0.10 each hold one
// 1200m pod each; none can take another's pod. The group also offers an
// 8-cpu node at 0.20: the three are replaced by it (0.20 <= 90 % of 0.30),
// also when the group is at its maxSize (the replacement counts without
// the nodes it replaces). At 0.28 it saves less than 10 % and nothing is
// replaced; bare pods are never moved for a replacement either; and a
// group already over its maxSize (a replacement given up left its node)
// gets no other replacement, which would pass maxSize by one more, but
// another group may take it. Pods that wait for a node are planned with
// the moved ones: one that fits beside them, or fits nowhere, holds
// nothing back; four that would need the large node's room do.
func TestReplaceByACheaperNode(t *testing.T) {
	for _, tt := range []struct {
		name    string
		large   string
		bare    bool
		maxSize int32
		// waiting are the cpu requests of pods that wait for a node.
		waiting []string
		// other, when set, is the price of a large node in a second group.
		other     string
		wantNodes int
		wantGroup string
		wantPrice float64
		// held, when set, is what the three nodes say keeps them
		// (ReplacementHeld): a replacement the rules hold back; unsaid
		// what they must not say.
		held, unsaid string
		// waitFor, when set, is the node group the waiting pods select;
		// otherFull leaves the group "other" no room (maxSize 0); follow
		// gives the waiting pods a required hostname affinity to the
		// moved pods (app=web); pinned pins a moved pod to its node.
		waitFor                   string
		otherFull, follow, pinned bool
		// smallSpot, largeSpot buy the small nodes, the large type at the
		// spot price (else on demand).
		smallSpot, largeSpot bool
	}{
		{name: "three small nodes become one large", large: "0.20", wantNodes: 3},
		{name: "at its maxSize", large: "0.20", maxSize: 3, wantNodes: 3},
		{name: "not when the large node saves less than 10 %", large: "0.28"},
		{name: "not when a pod is bare", large: "0.20", bare: true},
		{name: "not when the group is over its maxSize", large: "0.20", maxSize: 2,
			held: "node group mix is past its maxSize 2 (a replacement under way or given up", unsaid: "pods wait"},
		{name: "not when the group is over its maxSize, a pod waiting that fits nowhere", large: "0.20", maxSize: 2, waiting: []string{"64"},
			held: "node group mix is past its maxSize 2", unsaid: "pods wait"},
		{name: "over its maxSize, into another group", large: "0.20", maxSize: 2, other: "0.22", wantNodes: 3, wantGroup: "other", wantPrice: 0.22},
		{name: "a waiting pod that fits beside the moved pods", large: "0.20", waiting: []string{"1200m"}, wantNodes: 3},
		{name: "a waiting pod that fits nowhere holds nothing back", large: "0.20", waiting: []string{"64"}, wantNodes: 3},
		// kube-scheduler gives the waiting pods the large node's room as
		// soon as it is Ready: the moved pods would find none.
		{name: "not when waiting pods would take the new node's room", large: "0.20", waiting: []string{"1200m", "1200m", "1200m", "1200m"},
			held: "one large-8 node of node group mix (0.2000/h) would replace small-0, small-1, small-2 (0.3000/h), but pods wait for a node"},
		// Nothing would replace them without the waiting pods either: the
		// nodes say their pods have no home, not that pods waiting hold
		// a replacement back.
		{name: "not when it saves too little, pods waiting or not", large: "0.28", waiting: []string{"1200m", "1200m", "1200m", "1200m"}},
		// Pods that only another group's nodes take cannot take the new
		// node's room, whether that group has room or is at its maxSize;
		// the node planned for them is scale-up's, and no moved pod is
		// planned there.
		{name: "pods waiting at another group's maxSize hold nothing back", large: "0.20", other: "0.30", waitFor: "other", otherFull: true,
			waiting: []string{"1200m", "1200m", "1200m", "1200m"}, wantNodes: 3},
		{name: "pods waiting for another group's new node hold nothing back", large: "0.20", other: "0.30", waitFor: "other",
			waiting: []string{"1200m", "1200m", "1200m", "1200m"}, wantNodes: 3},
		// A 5-cpu pod that must run beside the moved pods fits on no new
		// node now, but would on the large node once one of them is
		// there, and take the room the other two need.
		{name: "not when a waiting pod would follow the moved pods onto the new node", large: "0.20", follow: true, waiting: []string{"5"},
			held: "pods wait for a node of node group mix"},
		{name: "not when a pod of theirs fits on no other node", large: "0.20", pinned: true},
		// Karpenter's spot-to-spot consolidation is off by default.
		{name: "spot nodes not by a spot node", large: "0.20", smallSpot: true, largeSpot: true},
		{name: "spot nodes by a cheaper on-demand node", large: "0.20", smallSpot: true, wantNodes: 3},
		{name: "on-demand nodes by a spot node", large: "0.20", largeSpot: true, wantNodes: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ng := group("mix", func(ng *v1alpha1.NodeGroup) {
				if tt.maxSize > 0 {
					ng.Spec.MaxSize = tt.maxSize
				}
				ng.Spec.InstanceTypes = nil
				b.InstanceType("small-2", "2", "8Gi", priced(tt.smallSpot, "0.10"))(ng)
				b.InstanceType("large-8", "8", "32Gi", priced(tt.largeSpot, tt.large))(ng)
			})
			smallCapacity := "on-demand"
			if tt.smallSpot {
				smallCapacity = "spot"
			}
			groups := []*v1alpha1.NodeGroup{ng}
			if tt.other != "" {
				groups = append(groups, group("other", func(ng *v1alpha1.NodeGroup) {
					ng.Spec.InstanceTypes = nil
					b.InstanceType("large-8", "8", "32Gi", b.OnDemand("zone-a", tt.other))(ng)
					if tt.otherFull {
						ng.Spec.MaxSize = 0
					}
				}))
			}
			var nodes []*corev1.Node
			var pods, pending []*corev1.Pod
			for i := range 3 {
				name := fmt.Sprintf("small-%d", i)
				nodes = append(nodes, b.Node(name, "2", "8Gi", b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "small-2",
					v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, smallCapacity)))
				opts := []b.PodOption{b.NodeName(name), b.CPU("1200m"), b.Phase(corev1.PodRunning), b.Labels("app", "web")}
				if !tt.bare {
					opts = append(opts, b.OwnedBy("ReplicaSet", "web"))
				}
				if tt.pinned && i == 0 {
					opts = append(opts, b.NodeSelector(corev1.LabelHostname, name))
				}
				pods = append(pods, b.Pod(fmt.Sprintf("w-%d", i), opts...))
			}
			for i, cpu := range tt.waiting {
				opts := []b.PodOption{b.CPU(cpu), b.OwnedBy("ReplicaSet", "burst")}
				if tt.waitFor != "" {
					opts = append(opts, b.NodeSelector(v1alpha1.LabelNodeGroup, tt.waitFor))
				}
				if tt.follow {
					opts = append(opts, b.PodAffinity(b.AffinityTerm(corev1.LabelHostname, "app", "web")))
				}
				pending = append(pending, b.Pod(fmt.Sprintf("wait-%d", i), opts...))
			}
			in := scaledown.Input{NodeGroups: groups, Nodes: nodes, Pods: pods, Pending: pending}
			plan, err := scaledown.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			// The controller keeps both models from round to round: built
			// in the first, brought up to date in the next, they must plan
			// as models built anew, also after the cluster changed (a node
			// read again as another object, a waiting pod gone).
			kept := in
			kept.Base, kept.WhatIf = snapshot.NewBase(), snapshot.NewBase()
			for round := range 3 {
				want := plan
				if round == 2 {
					kept.Nodes = append([]*corev1.Node{nodes[0].DeepCopy()}, nodes[1:]...)
					if len(pending) > 0 {
						kept.Pending = pending[1:]
					}
					fresh := kept
					fresh.Base, fresh.WhatIf = nil, nil
					if want, err = scaledown.Run(fresh); err != nil {
						t.Fatal(err)
					}
				}
				got, err := scaledown.Run(kept)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("round %d with the models kept plans otherwise (-fresh +kept):\n%s", round+1, diff)
				}
			}
			if b := kept.WhatIf; b.Builds > 1 {
				t.Errorf("the what-ifs' model was built %d times in three rounds (synced %d), want once", b.Builds, b.Syncs)
			}
			if len(plan.Remove) != 0 {
				t.Fatalf("removed %+v: no node can be removed outright", plan.Remove)
			}
			got := 0
			if len(plan.Replace) == 1 {
				got = len(plan.Replace[0].Nodes)
				wantGroup, wantPrice := "mix", 0.20
				if tt.wantGroup != "" {
					wantGroup, wantPrice = tt.wantGroup, tt.wantPrice
				}
				if r := plan.Replace[0]; r.New.InstanceType != "large-8" || r.New.NodeGroup != wantGroup || r.NewPrice != wantPrice || r.OldPrice < 0.2999 || r.OldPrice > 0.3001 {
					t.Errorf("replacement %+v, want large-8 of %s at %.2f for 0.30", r, wantGroup, wantPrice)
				}
			}
			if got != tt.wantNodes || len(plan.Replace) > 1 {
				t.Errorf("replacements %+v, want %d nodes replaced", plan.Replace, tt.wantNodes)
			}
			held := 0
			for _, bl := range plan.Blocked {
				if bl.Reason != scaledown.ReasonReplacementHeld {
					continue
				}
				held++
				if tt.held == "" || !strings.Contains(bl.Message, tt.held) || (tt.unsaid != "" && strings.Contains(bl.Message, tt.unsaid)) {
					t.Errorf("node %s stays: %q, want no replacement said to be held back (%q)", bl.Node, bl.Message, tt.held)
				}
			}
			if tt.held != "" && held != 3 {
				t.Errorf("%d nodes say a replacement is held back (%+v), want 3", held, plan.Blocked)
			}
		})
	}
}

// priced is an offering in zone-a at price, bought at the spot price when
// spot is set.
func priced(spot bool, price string) v1alpha1.Offering {
	if spot {
		return b.Spot("zone-a", price)
	}
	return b.OnDemand("zone-a", price)
}

// TestNoReplacementWhoseRoomAWaitingPodCouldTake: a group at its maxSize
// of 1 runs a 6-cpu pod on an 8-cpu node at 0.40; a cheaper 8-cpu type at
// 0.20 would hold it. A 5-cpu pod waits, at maxSize. The new node would
// hold one of the two, and kube-scheduler gives it to the waiting pod as
// soon as it is Ready: the replacement would be given up and the group
// left past its maxSize. The waiting pod is left out of the what-if by
// maxSize alone, so it does not count as fitting nowhere.
func TestNoReplacementWhoseRoomAWaitingPodCouldTake(t *testing.T) {
	for _, tt := range []struct {
		name    string
		waiting string
		want    bool
	}{
		{name: "a waiting pod that fits the new node, held back by maxSize", waiting: "5"},
		{name: "a waiting pod that fits no node", waiting: "64", want: true},
		{name: "no waiting pod", want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ng := group("full", func(ng *v1alpha1.NodeGroup) {
				ng.Spec.MaxSize = 1
				ng.Spec.InstanceTypes = nil
				b.InstanceType("big-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"))(ng)
				b.InstanceType("cheap-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(ng)
			})
			in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng},
				Nodes: []*corev1.Node{b.Node("old", "8", "32Gi", b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "big-8",
					v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand"))},
				Pods: []*corev1.Pod{b.Pod("run", b.NodeName("old"), b.CPU("6"), b.OwnedBy("ReplicaSet", "web"), b.Phase(corev1.PodRunning))}}
			if tt.waiting != "" {
				in.Pending = []*corev1.Pod{b.Pod("wait", b.CPU(tt.waiting), b.OwnedBy("ReplicaSet", "burst"))}
			}
			plan, err := scaledown.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(plan.Replace) == 1; got != tt.want {
				t.Errorf("replaced: %v (%+v), want %v", got, plan.Replace, tt.want)
			}
		})
	}
}

// TestAPodMovedTwiceIsEvictedOnceAndSaidToMoveWhereItEnds: a's pod can
// only go to a zone-1 node; the fullest one with room is b, itself
// removed next, so in the plan the pod moves on to d (which stays:
// do-not-disrupt). Users read the moves (berth explain) and budgets count
// evictions: a's removal says its pod goes to d, not to a node that goes
// too; b's removal evicts only b's own pod; and the PDB allowing two
// evictions lets both nodes go, each pod counted once.
func TestAPodMovedTwiceIsEvictedOnceAndSaidToMoveWhereItEnds(t *testing.T) {
	g := group("g")
	zone := func(z string) b.NodeOption { return b.NodeLabels(corev1.LabelTopologyZone, z) }
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g},
		Nodes: []*corev1.Node{node("a", g, zone("z1")), node("b", g, zone("z1")), node("c", g, zone("z2")),
			node("d", g, zone("z1"), b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true"))},
		Pods: []*corev1.Pod{app("a1", "a", "100m", b.NodeSelector(corev1.LabelTopologyZone, "z1")), app("b1", "b", "200m"),
			app("c1", "c", "3900m"), b.Pod("d1", b.NodeName("d"), b.CPU("150m"), b.Phase(corev1.PodRunning))},
		PDBs: []*policyv1.PodDisruptionBudget{pdb("web", 2)}}
	plan, err := scaledown.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []scaledown.Removal
	for _, r := range plan.Remove {
		got = append(got, scaledown.Removal{Node: r.Node, Evict: r.Evict})
	}
	want := []scaledown.Removal{
		{Node: "a", Evict: []scaledown.Move{{Pod: scaleup.PodRef{Namespace: "default", Name: "a1"}, To: "d"}}},
		{Node: "b", Evict: []scaledown.Move{{Pod: scaleup.PodRef{Namespace: "default", Name: "b1"}, To: "d"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("removals (-want +got):\n%s\nblocked: %+v", diff, plan.Blocked)
	}
}

// TestANodeItsBudgetKeepsKeepsItsPodsInThePlan: a's two web pods would fit
// elsewhere, but their PDB allows one disruption, so a stays; it stays
// with its pods and its room, so b's pod moves to a and b goes (the plan
// must not count a's pods on the nodes they would have moved to, nor a as
// no home).
func TestANodeItsBudgetKeepsKeepsItsPodsInThePlan(t *testing.T) {
	g := group("g")
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g},
		Nodes: []*corev1.Node{node("a", g), node("b", g), node("c", g)},
		Pods: []*corev1.Pod{app("a1", "a", "500m"), app("a2", "a", "500m"),
			app("b1", "b", "1", b.Labels("app", "api"), b.OwnedBy("ReplicaSet", "api")), app("c1", "c", "3500m", b.Labels("app", "batch"))},
		PDBs: []*policyv1.PodDisruptionBudget{pdb("web", 1)}}
	got := run(t, in)
	want := outcome{removed: []string{"b"}, blocked: map[string]string{"a": "PodDisruptionBudget", "c": "NoHome default/c1"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestNoPodMovesOntoANodeOfADeletedGroup: r's group is being deleted
// and r's own pod fits nowhere, so r goes with it (the pod waits for a
// node elsewhere) and stays in the plan's model with its room free: a's
// pod must move to b, which stays, not to r, the fuller node, which goes.
func TestNoPodMovesOntoANodeOfADeletedGroup(t *testing.T) {
	g := group("g")
	old := group("old", func(ng *v1alpha1.NodeGroup) {
		ng.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		ng.Spec.DeletionPolicy = v1alpha1.DeletionDrain
	})
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g, old},
		Nodes: []*corev1.Node{node("a", g), node("b", g, b.NodeAnnotation(v1alpha1.AnnotationDoNotDisrupt, "true")), node("r", old)},
		Pods:  []*corev1.Pod{app("a1", "a", "100m"), app("b1", "b", "600m"), app("r1", "r", "3500m")}}
	plan, err := scaledown.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	moves := map[string][]scaledown.Move{}
	for _, r := range plan.Remove {
		moves[r.Node] = r.Evict
	}
	want := map[string][]scaledown.Move{
		"a": {{Pod: scaleup.PodRef{Namespace: "default", Name: "a1"}, To: "b"}},
		"r": {{Pod: scaleup.PodRef{Namespace: "default", Name: "r1"}}},
	}
	if diff := cmp.Diff(want, moves); diff != "" {
		t.Errorf("removals and their moves (-want +got):\n%s", diff)
	}
}

// TestADrainedNodeLeavesTheSpreadsThatHonorTaints: two nodes, each with
// a pod of one Deployment spread by hostname (maxSkew 1). Node a's pod
// (1 cpu) fits on b beside b's (2 cpu). kube-scheduler counts the domains
// of a spread whose nodeTaintsPolicy is Honor over the nodes whose taints
// the pod tolerates: once the drain taints a (berth.dev/disrupted), b is
// the only domain and the pod may join it, so a goes. With the default
// policy (Ignore), or a pod that tolerates the drain's taint, the drained
// node still counts (with no pod) until it is deleted: the move would
// make a skew of 2, and a stays. (Cluster Autoscaler's "node removable
// with nodeTaintsPolicy Honor".)
func TestADrainedNodeLeavesTheSpreadsThatHonorTaints(t *testing.T) {
	g := group("g")
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	spread := func(policy corev1.NodeInclusionPolicy) b.PodOption {
		return b.SpreadConstraint(corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: &policy,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	}
	for _, tc := range []struct {
		name string
		opts []b.PodOption
		want outcome
	}{
		{"Honor: a goes", []b.PodOption{spread(honor)},
			outcome{removed: []string{"a"}, blocked: map[string]string{"b": "NoHome default/w-b"}}},
		{"Ignore: a stays", []b.PodOption{spread(ignore)},
			outcome{blocked: map[string]string{"a": "NoHome default/w-a", "b": "NoHome default/w-b"}}},
		{"Honor, the drain's taint tolerated: a stays", []b.PodOption{spread(honor),
			b.Tolerate(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)},
			outcome{blocked: map[string]string{"a": "NoHome default/w-a", "b": "NoHome default/w-b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g}, Nodes: []*corev1.Node{node("a", g), node("b", g)},
				Pods: []*corev1.Pod{app("w-a", "a", "1", tc.opts...), app("w-b", "b", "2", tc.opts...)}}
			if diff := cmp.Diff(tc.want, run(t, in), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestADeletedGroupsDeadNodeGoesToo (a NodePool's deletion takes its
// NodeClaims, Ready or not): a group deleted with deletionPolicy Drain,
// one node Ready and one that was Ready once and is NotReady now, with a
// pod: both are planned away (the dead one was never a candidate, and
// the group's deletion waited on it for ever).
func TestADeletedGroupsDeadNodeGoesToo(t *testing.T) {
	ng := group("gone")
	ng.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	other := group("other")
	nodes := []*corev1.Node{node("live", ng), node("dead", ng, b.NotReady()), node("o", other)}
	got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng, other}, Nodes: nodes,
		Pods: []*corev1.Pod{app("w", "dead", "1")}})
	if !slices.Contains(got.removed, "dead") || !slices.Contains(got.removed, "live") {
		t.Errorf("removed %v, blocked %v; want dead and live removed", got.removed, got.blocked)
	}
}

// TestAPodNominatedToANodeHoldsItsRoom (Karpenter's emptiness suite
// considers pending pods): a pod waits for node n, nominated to it (berth
// launched n for it); node m's pod fits on n only in the room the waiting
// pod is to take: m stays (it was removed, its pod planned onto n, where
// kube-scheduler keeps the room for the nominated pod, and it waited).
func TestAPodNominatedToANodeHoldsItsRoom(t *testing.T) {
	ng := group("nom")
	waiting := b.Pod("waiting", b.CPU("3"), b.OwnedBy("ReplicaSet", "other"))
	waiting.Status.NominatedNodeName = "n"
	in := scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{node("n", ng), node("m", ng)},
		Pods: []*corev1.Pod{app("q", "m", "3")}, Nominated: []*corev1.Pod{waiting}}
	got := run(t, in)
	if len(got.removed) != 0 || !strings.HasPrefix(got.blocked["m"], string(scaledown.ReasonNoHome)) {
		t.Errorf("removed %v, blocked %v; want m kept (NoHome): n's room is the nominated pod's", got.removed, got.blocked)
	}
	// The check before a drain (or before a replaced node is drained) says so too.
	if bl, err := scaledown.Recheck(in, "m"); err != nil || bl == nil || bl.Reason != scaledown.ReasonNoHome {
		t.Errorf("Recheck of m: %+v, %v; want NoHome", bl, err)
	}
}

// TestARemovalWaitingForItsWindowHoldsNothingBack: group night may
// disrupt only from 02:00 to 03:00; at noon its emptiest node is still
// planned (its consolidateAfter runs), but last: its pod takes no room a
// group without a window needs for a removal that can start now, and no
// replacement waits for it.
func TestARemovalWaitingForItsWindowHoldsNothingBack(t *testing.T) {
	noon := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	night := group("night", func(g *v1alpha1.NodeGroup) {
		g.Spec.Disruption.Window = &v1alpha1.DisruptionWindow{Cron: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}
	})
	t.Run("room", func(t *testing.T) {
		day := group("day")
		got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{night, day}, Now: noon,
			Nodes: []*corev1.Node{node("a", night), node("b", day), node("c", day)},
			Pods:  []*corev1.Pod{app("pa", "a", "1"), app("pb", "b", "1500m"), app("busy", "c", "2500m")}})
		want := outcome{removed: []string{"b"}, blocked: map[string]string{"a": "NoHome default/pa", "c": "NoHome default/pb"}}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
			t.Errorf("plan at noon (-want +got):\n%s", diff)
		}
		at2 := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{night, day}, Now: noon.Add(14*time.Hour + 30*time.Minute),
			Nodes: []*corev1.Node{node("a", night), node("b", day), node("c", day)},
			Pods:  []*corev1.Pod{app("pa", "a", "1"), app("pb", "b", "1500m"), app("busy", "c", "2500m")}})
		if !slices.Contains(at2.removed, "a") {
			t.Errorf("at 02:30, in its window, a is not removed: %+v", at2)
		}
	})
	t.Run("replacement", func(t *testing.T) {
		day := group("day", func(ng *v1alpha1.NodeGroup) {
			ng.Spec.InstanceTypes = nil
			b.InstanceType("c8", "8", "64Gi", b.OnDemand("zone-a", "0.40"))(ng)
			b.InstanceType("c16", "16", "64Gi", b.OnDemand("zone-a", "0.80"))(ng)
		})
		dedicated := b.NodeTaint("dedicated", "night", corev1.TaintEffectNoSchedule)
		plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{night, day}, Now: noon,
			Nodes: []*corev1.Node{node("idle", night, dedicated), b.Node("big", "16", "64Gi", b.LaunchedBy(day),
				b.NodeLabels(v1alpha1.LabelInstanceType, "c16", v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "on-demand"))},
			Pods: []*corev1.Pod{app("w1", "big", "3"), app("w2", "big", "3")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Replace) != 1 || !slices.Equal(plan.Replace[0].Nodes, []string{"big"}) || plan.Replace[0].New.InstanceType != "c8" {
			t.Errorf("replacements %+v, want big replaced by a c8 while idle waits for its window", plan.Replace)
		}
		if len(plan.Remove) != 1 || plan.Remove[0].Node != "idle" {
			t.Errorf("removals %+v, want idle planned, waiting for its window", plan.Remove)
		}
	})
}

// TestANodeNoCheaperNodeCanTakeDoesNotKeepTheOthersFromBeingReplaced:
// node a, the least utilised, runs the cheapest type with a pod pinned to
// zone-a: nothing replaces it, alone or with big. big (a c16 running 6
// cpu of zone-b pods) is replaced by a c8 on its own.
func TestANodeNoCheaperNodeCanTakeDoesNotKeepTheOthersFromBeingReplaced(t *testing.T) {
	ng := group("g", func(ng *v1alpha1.NodeGroup) {
		ng.Spec.InstanceTypes = nil
		b.InstanceType("c2", "2", "64Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.10"))(ng)
		b.InstanceType("c8", "8", "64Gi", b.OnDemand("zone-a", "0.40"), b.OnDemand("zone-b", "0.40"))(ng)
		b.InstanceType("c16", "16", "64Gi", b.OnDemand("zone-a", "0.80"), b.OnDemand("zone-b", "0.80"))(ng)
	})
	zonal := func(name, it, cpu, zone string) *corev1.Node {
		return b.Node(name, cpu, "64Gi", b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, it,
			v1alpha1.LabelZone, zone, v1alpha1.LabelCapacityType, "on-demand"))
	}
	plan, err := scaledown.Run(scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{ng},
		Nodes: []*corev1.Node{zonal("a", "c2", "2", "zone-a"), zonal("big", "c16", "16", "zone-b")},
		Pods: []*corev1.Pod{
			app("za", "a", "500m", b.NodeSelector(v1alpha1.LabelZone, "zone-a")),
			app("zb-1", "big", "3", b.NodeSelector(v1alpha1.LabelZone, "zone-b")),
			app("zb-2", "big", "3", b.NodeSelector(v1alpha1.LabelZone, "zone-b")),
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Replace) != 1 || !slices.Equal(plan.Replace[0].Nodes, []string{"big"}) || plan.Replace[0].New.InstanceType != "c8" {
		t.Errorf("replacements %+v, want big replaced by a c8 (blocked: %+v)", plan.Replace, plan.Blocked)
	}
}

// TestAPodThatFollowsASmallerPodMovesWithIt: an app pod (1 cpu) requires
// to run on the node of its cache pod (200m). Largest first, the app pod
// was tried before its cache had a new node, found none, and kept node a
// for ever; it now goes once the cache pod has gone to node h.
func TestAPodThatFollowsASmallerPodMovesWithIt(t *testing.T) {
	g := group("g")
	optOut := func(n *corev1.Node) { n.Annotations[v1alpha1.AnnotationDoNotDisrupt] = "true" }
	got := run(t, scaledown.Input{NodeGroups: []*v1alpha1.NodeGroup{g},
		Nodes: []*corev1.Node{node("a", g), node("h", g, optOut)},
		Pods: []*corev1.Pod{app("cache", "a", "200m", b.Labels("app", "cache")),
			app("app", "a", "1", b.PodAffinity(b.AffinityTerm(corev1.LabelHostname, "app", "cache")))}})
	want := outcome{removed: []string{"a"}, blocked: map[string]string{"h": "NodeDoNotDisrupt"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestCoolingReadsTheGiveUpOnTheNode: a node cools down for
// GiveUpCooldown after the time its berth.dev/drain-given-up says; a time
// that cannot be read, or one far in the future (a clock set wrong), holds
// no node back for ever.
func TestCoolingReadsTheGiveUpOnTheNode(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	node := func(name, at string) *corev1.Node {
		n := b.Node(name, "2", "8Gi")
		if at != "" {
			n.Annotations = map[string]string{v1alpha1.AnnotationDrainGivenUp: at}
		}
		return n
	}
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	got := scaledown.Cooling([]*corev1.Node{
		node("none", ""), node("just", at(-time.Minute)), node("edge", at(-scaledown.GiveUpCooldown)),
		node("past", at(-scaledown.GiveUpCooldown-time.Second)), node("garbled", "yesterday"),
		node("skewed", at(30*time.Second)), node("future", at(time.Hour)),
	}, now)
	var names []string
	for name, msg := range got {
		names = append(names, name)
		if !strings.Contains(msg, "berth gave up draining node "+name) {
			t.Errorf("%s: message %q", name, msg)
		}
	}
	slices.Sort(names)
	if want := []string{"edge", "just", "skewed"}; !slices.Equal(names, want) {
		t.Errorf("cooling %v, want %v", names, want)
	}
}
