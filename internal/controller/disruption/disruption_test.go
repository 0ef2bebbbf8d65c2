package disruption_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

type fixture struct {
	t      *testing.T
	ns     string
	group  *v1alpha1.NodeGroup
	nodes  []string
	ctrl   *disruption.Controller
	events *fakes.Recorder
	clk    *clocktesting.FakeClock
}

// setup creates a node group whose nodes are removable as soon as they are
// (consolidateAfter 0, budget 100 %), n Ready nodes of 2 cpu launched for
// it, a namespace, and a controller with a fake clock.
func setup(t *testing.T, name string, n int, opts ...b.NodeGroupOption) *fixture {
	t.Helper()
	ctx := context.Background()
	all := intstr.FromString("100%")
	ng := b.NodeGroup(name, append([]b.NodeGroupOption{b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))}, opts...)...)
	ng.Spec.Disruption = v1alpha1.Disruption{ConsolidateAfter: &metav1.Duration{}, Budget: &all, DrainTimeout: &metav1.Duration{Duration: 5 * time.Minute}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range []client.Object{ng, ns} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{t: t, ns: name, group: ng, events: &fakes.Recorder{}, clk: clocktesting.NewFakeClock(time.Now())}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), ns)
		_ = env.Client.Delete(context.Background(), ng)
		_ = env.Client.DeleteAllOf(context.Background(), &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: name})
	})
	cloud := kwok.New(env.Client, clock.RealClock{})
	for range n {
		inst, err := cloud.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
		if err != nil {
			t.Fatal(err)
		}
		f.nodes = append(f.nodes, inst.NodeName)
	}
	for _, name := range f.nodes {
		node := &corev1.Node{}
		expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			err := env.Client.Get(ctx, client.ObjectKey{Name: name}, node)
			return err == nil && nodeutil.Schedulable(node), "node " + name + " not schedulable yet", err
		})
		// What the launch timeout controller does when it sees it Ready.
		patch := client.MergeFrom(node.DeepCopy())
		node.Labels[v1alpha1.LabelInitialized] = "true"
		if err := env.Client.Patch(ctx, node, patch); err != nil {
			t.Fatal(err)
		}
	}
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	return f
}

// deployment runs replicas pods of 1 cpu on the group's nodes, spread one
// per node, and waits until they run.
func (f *fixture) deployment(replicas int32) { f.deploymentOf(replicas, "1") }

func (f *fixture) deploymentOf(replicas int32, cpu string) {
	f.t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
			Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1alpha1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}},
	}}
	if err := env.Client.Create(ctx, d); err != nil {
		f.t.Fatal(err)
	}
	f.waitRunning(int(replicas))
}

func (f *fixture) waitRunning(n int) {
	f.t.Helper()
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == n, fmt.Sprintf("%d of %d pods running", running, n), nil
	})
}

// pdb sets the web PodDisruptionBudget and waits until its status allows
// `allowed` disruptions.
func (f *fixture) pdb(spec policyv1.PodDisruptionBudgetSpec, allowed int32) {
	f.t.Helper()
	ctx := context.Background()
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); apierrors.IsNotFound(err) {
		pdb.Spec = spec
		if err := env.Client.Create(ctx, pdb); err != nil {
			f.t.Fatal(err)
		}
	} else if err != nil {
		f.t.Fatal(err)
	} else {
		pdb.Spec = spec
		if err := env.Client.Update(ctx, pdb); err != nil {
			f.t.Fatal(err)
		}
	}
	expect.Eventually(f.t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		ok := err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == allowed
		return ok, fmt.Sprintf("PDB allows %d disruptions, want %d", pdb.Status.DisruptionsAllowed, allowed), err
	})
}

// drainHeldByPDB runs the deployment of two pods, one a node, under a PDB
// that allows one disruption; the first round starts draining one node,
// and then the PDB allows none, so the drain waits. It returns that node.
func (f *fixture) drainHeldByPDB() string {
	f.t.Helper()
	f.deployment(2)
	f.pdb(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 1)
	res := f.run()
	if len(res.Started) != 1 {
		f.t.Fatalf("started %v, want one node", res.Started)
	}
	f.pdb(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 0)
	return res.Started[0]
}

func (f *fixture) run() *disruption.Result {
	f.t.Helper()
	res, err := f.ctrl.RunOnce(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *fixture) node(name string) *corev1.Node {
	n := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		f.t.Fatal(err)
	}
	return n
}

// condition is the node's BerthDisruption condition as the API server
// has it (empty when it has none).
func (f *fixture) condition(name string) corev1.NodeCondition {
	for _, c := range f.node(name).Status.Conditions {
		if c.Type == v1alpha1.NodeConditionDisruption {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintDisrupted {
			return true
		}
	}
	return false
}

// TestTaintFirstEvictWithinThePDBThenRemove: two nodes, one pod each, a
// PDB allowing one disruption. The first round taints one node and evicts
// nothing; while the PDB allows no disruption the eviction is refused and
// retried, the pod stays; once allowed the pod is evicted, runs on the
// other node, and the node is deleted.
func TestTaintFirstEvictWithinThePDBThenRemove(t *testing.T) {
	f := setup(t, "sd-pdb", 2)
	f.deployment(2)
	f.pdb(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 1)

	res := f.run()
	if len(res.Started) != 1 {
		t.Fatalf("first round started %v, want one node (the other must take its pod)", res.Started)
	}
	victim := res.Started[0]
	if n := f.node(victim); n == nil || !tainted(n) {
		t.Fatalf("node %s after the first round: want it tainted %s", victim, v1alpha1.TaintDisrupted)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s is being deleted in the round that tainted its node: the taint must come first", p.Name)
		}
	}

	// The budget closes: the eviction is refused (429) and not forced.
	f.pdb(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 0)
	for range 3 {
		f.run()
	}
	f.waitRunning(2)
	if n := f.node(victim); n == nil || !tainted(n) {
		t.Fatalf("node %s while the PDB refuses: want it still there and tainted", victim)
	}

	// The budget opens: the drain finishes.
	f.pdb(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 1)
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		f.run()
		return f.node(victim) == nil, "node " + victim + " not removed yet", nil
	})
	f.waitRunning(2)
	removed := false
	for _, e := range f.events.For(victim) {
		removed = removed || e.Reason == disruption.ReasonRemoved
	}
	if !removed {
		t.Errorf("no Removed event on %s: %+v", victim, f.events.For(victim))
	}
}

// drainStartedLongAgoHeldByPDB runs two pods whose PDB allows no
// disruption, and marks the first node as a previous leader left it: its
// drain started (taint and start annotation) 10 minutes ago, past the
// 5-minute drain timeout. It returns that node.
func (f *fixture) drainStartedLongAgoHeldByPDB() string {
	f.t.Helper()
	f.deployment(2)
	f.pdb(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 0)
	victim := f.nodes[0]
	n := f.node(victim)
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	n.Annotations[v1alpha1.AnnotationDisruptionStarted] = f.clk.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	if err := env.Client.Patch(context.Background(), n, patch); err != nil {
		f.t.Fatal(err)
	}
	return victim
}

// TestADrainThatTimesOutIsGivenUp: a node a previous leader started to
// drain long ago (taint and start annotation) whose pod's PDB allows no
// disruption: the new controller re-checks it, finds the drain past the
// timeout, untaints the node and says why; nothing is evicted or deleted.
func TestADrainThatTimesOutIsGivenUp(t *testing.T) {
	f := setup(t, "sd-timeout", 2)
	victim := f.drainStartedLongAgoHeldByPDB()
	res := f.run()
	if len(res.GivenUp) != 1 || res.GivenUp[0] != victim {
		t.Fatalf("given up %v, want [%s]", res.GivenUp, victim)
	}
	if n := f.node(victim); n == nil || tainted(n) || n.Annotations[v1alpha1.AnnotationDisruptionStarted] != "" {
		t.Fatalf("node %s after the timeout: want it kept, untainted, without the start annotation", victim)
	}
	timedOut := false
	for _, e := range f.events.For(victim) {
		timedOut = timedOut || (e.Reason == disruption.ReasonDrainTimedOut && strings.Contains(e.Message, "did not finish"))
	}
	if !timedOut {
		t.Errorf("events on %s: %+v, want DrainTimedOut", victim, f.events.For(victim))
	}
	f.waitRunning(2)
}

// TestRemovalsWaitForTheWindow: a removable node is not touched while the
// group's disruption window is closed, and is once it opens.
func TestRemovalsWaitForTheWindow(t *testing.T) {
	f := setup(t, "sd-window", 1)
	now := f.clk.Now().UTC()
	// A window of one hour opening at the next full hour + 1.
	opens := now.Truncate(time.Hour).Add(2 * time.Hour)
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(f.group), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Disruption.Window = &v1alpha1.DisruptionWindow{Cron: fmt.Sprintf("0 %d * * *", opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}}
	if err := env.Client.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	if res := f.run(); len(res.Started) != 0 || len(res.Plan.Remove) != 1 {
		t.Fatalf("window closed: started %v, planned %d removals; want 1 planned and none started", res.Started, len(res.Plan.Remove))
	}
	f.clk.SetTime(opens.Add(time.Minute))
	if res := f.run(); len(res.Started) != 1 {
		t.Fatalf("window open: started %v, want the empty node", res.Started)
	}
}

// TestReplaceByACheaperNodeFirst: three 2-cpu nodes (0.10/h each) hold one
// 1200m pod each. Once the group offers an 8-cpu node at 0.20/h, berth
// launches one, waits until it is Ready, and only then taints the three
// old nodes; their pods move to it and the old nodes are deleted.
func TestReplaceByACheaperNodeFirst(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-replace", 3)
	f.deploymentOf(3, "1200m")
	g := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.group), g); err != nil {
		t.Fatal(err)
	}
	b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g)
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	var repl string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		res := f.run()
		if len(res.Replacements) == 1 {
			repl = res.Replacements[0]
		}
		return repl != "", "no replacement launched", nil
	})
	for _, old := range f.nodes {
		if n := f.node(old); n == nil || tainted(n) || n.Annotations[v1alpha1.AnnotationReplacedBy] != repl {
			t.Fatalf("old node %s right after the launch: want it marked replaced by %s and not tainted", old, repl)
		}
	}
	var readyAt time.Time
	expect.Eventually(t, 2*time.Minute, func(context.Context) (bool, string, error) {
		f.run()
		if n := f.node(repl); n != nil && readyAt.IsZero() && nodeutil.Schedulable(n) {
			readyAt = time.Now()
		}
		for _, old := range f.nodes {
			if n := f.node(old); n != nil {
				if tainted(n) && readyAt.IsZero() {
					return false, "", expect.Permanent(fmt.Errorf("old node %s tainted before the replacement was Ready", old))
				}
				return false, "old node " + old + " still there", nil
			}
		}
		return true, "", nil
	})
	f.waitRunning(3)
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != repl {
			t.Errorf("pod %s runs on %s, want the replacement %s", p.Name, p.Spec.NodeName, repl)
		}
	}
}

// TestNoReplacementWhileWaitingPodsWouldTakeItsRoom: as in
// TestReplaceByACheaperNodeFirst, one 8-cpu node could replace the three
// 2-cpu nodes, but four more pods of 1200m wait for a node (the provisioner
// is not running). kube-scheduler would give them the new node's room as
// soon as it is Ready, and the three pods to move would find none: no
// replacement is launched while they wait. Once they are gone, it is.
func TestNoReplacementWhileWaitingPodsWouldTakeItsRoom(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "sd-replace-waiting", 3)
	f.deploymentOf(3, "1200m")
	burst := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "burst"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "burst"}}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group.Name},
			Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1200m")}}}},
		}},
	}}
	if err := env.Client.Create(ctx, burst); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns), client.MatchingLabels{"app": "burst"}); err != nil {
			return false, "", err
		}
		marked := 0
		for _, p := range pods.Items {
			if podutil.FailedToSchedule(&p) {
				marked++
			}
		}
		return marked == 4, fmt.Sprintf("%d of 4 waiting pods marked unschedulable", marked), nil
	})
	f.updateGroup(func(g *v1alpha1.NodeGroup) { b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g) })
	// The plan is made from the cache: give it the time to see the group
	// and the pods, over rounds a minute apart on the fake clock.
	saw := false
	for range 10 {
		res := f.run()
		if len(res.Replacements) != 0 || len(res.Plan.Replace) != 0 {
			t.Fatalf("planned %+v, launched %v while four pods wait that would take the new node's room", res.Plan.Replace, res.Replacements)
		}
		saw = saw || len(res.Plan.Unplaced) == 4
		f.clk.Step(time.Minute)
		time.Sleep(200 * time.Millisecond)
	}
	if !saw {
		t.Fatal("no round saw the four waiting pods: the test proves nothing")
	}
	// kubectl describe node says why they stay.
	for _, name := range f.nodes {
		if c := f.condition(name); c.Reason != string(scaledown.ReasonReplacementHeld) || !strings.Contains(c.Message, "l-8") ||
			!strings.Contains(c.Message, "pods wait for a node") {
			t.Errorf("condition of node %s: %+v, want ReplacementHeld naming the l-8 node and the waiting pods", name, c)
		}
	}
	if err := env.Client.Delete(ctx, burst, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		res := f.run()
		f.clk.Step(time.Minute)
		return len(res.Replacements) == 1, "no replacement launched once the waiting pods are gone", nil
	})
}

// TestOldNodesAreDrainedOnceTheirReplacementIsUp (Karpenter's
// orchestration queue: a command finishes once its replacements are
// initialized): as in TestReplaceByACheaperNodeFirst, but the group's
// nodes start with a startup taint an agent removes. The old nodes are
// not drained while the Ready replacement still carries it (their pods
// would wait there); once it is removed they are.
func TestOldNodesAreDrainedOnceTheirReplacementIsUp(t *testing.T) {
	f := setup(t, "sd-replace-up", 3)
	f.deploymentOf(3, "1200m")
	const agent = "agent.example.com/not-ready"
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g)
		g.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: agent, Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	})
	var repl string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		if res := f.run(); len(res.Replacements) > 0 {
			repl = res.Replacements[0]
		}
		return repl != "", "no replacement launched", nil
	})
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		n := f.node(repl)
		return n != nil && nodeutil.Ready(n), "replacement " + repl + " not Ready yet", nil
	})
	for range 3 {
		f.run()
	}
	for _, old := range f.nodes {
		if n := f.node(old); n == nil || tainted(n) {
			t.Fatalf("old node %s drained while its Ready replacement %s still carries its startup taint %s", old, repl, agent)
		}
	}
	// The agent on every new node (the changed startup taints drifted the
	// old nodes: a replacement may be launched for each) removes it.
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		nodes := &corev1.NodeList{}
		if err := env.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group.Name}); err != nil {
			return false, "", err
		}
		for i := range nodes.Items {
			if n := &nodes.Items[i]; !slices.Contains(f.nodes, n.Name) && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == agent }) {
				f.patchNode(n.Name, func(n *corev1.Node) {
					n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == agent })
				})
			}
		}
		f.run()
		for _, old := range f.nodes {
			if f.node(old) != nil {
				return false, "old node " + old + " still there", nil
			}
		}
		return true, "", nil
	})
}

// TestAGivenUpDrainCoolsDownAcrossRestarts: a node whose drain berth gave
// up is not drained again for GiveUpCooldown, also by a controller that
// started after the give-up (the time is on the node,
// berth.dev/drain-given-up). Before, a restart forgot it: the node was
// tainted and its pods evicted again at once, churning them and the load
// balancers for a drain that had just failed.
func TestAGivenUpDrainCoolsDownAcrossRestarts(t *testing.T) {
	f := setup(t, "sd-cooldown", 2)
	victim := f.drainStartedLongAgoHeldByPDB()
	if res := f.run(); !contains(res.GivenUp, victim) {
		t.Fatalf("given up %v, want %s", res.GivenUp, victim)
	}
	if at := f.node(victim).Annotations[v1alpha1.AnnotationDrainGivenUp]; at == "" {
		t.Fatalf("node %s after its drain was given up: no %s", victim, v1alpha1.AnnotationDrainGivenUp)
	}
	// What held the drain goes: the node is removable again.
	f.pdb(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 1)
	cooling := func(res *disruption.Result) bool {
		for _, b := range res.Plan.Blocked {
			if b.Node == victim && b.Reason == scaledown.ReasonRecentlyGivenUp {
				return true
			}
		}
		return false
	}
	f.clk.Step(time.Minute)
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: f.ctrl.Cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	res := f.run()
	if contains(res.Started, victim) || !cooling(res) {
		t.Fatalf("a minute after the give-up, after a restart: started %v, blocked %+v; want %s cooling down", res.Started, res.Plan.Blocked, victim)
	}
	if n := f.node(victim); n == nil || tainted(n) {
		t.Fatalf("node %s tainted again a minute after its drain was given up", victim)
	}
	f.clk.Step(scaledown.GiveUpCooldown)
	if res := f.run(); cooling(res) {
		t.Errorf("%s past the cool-down: still blocked %+v", victim, res.Plan.Blocked)
	}
}

// refreshFails is a cloud whose node groups cannot be refreshed while
// fail is set (a Cluster API management cluster that times out, or an
// annotation that does not parse).
type refreshFails struct {
	cloudprovider.CloudProvider
	fail bool
}

func (c *refreshFails) RefreshNodeGroup(context.Context, *v1alpha1.NodeGroup) error {
	if c.fail {
		return errors.New("the server was unable to return a response in the time allotted")
	}
	return nil
}

// TestNoRemovalStartsInAGroupItsProviderCouldNotRefresh (a review): a
// group planned with its spec because its provider could not refresh it
// may be planned to remove sooner (its object's consolidateAfter is
// lost) or below its object's bounds: no removal starts there that round,
// and one does once it refreshes.
func TestNoRemovalStartsInAGroupItsProviderCouldNotRefresh(t *testing.T) {
	f := setup(t, "sd-refresh", 2)
	f.deployment(1)
	cloud := &refreshFails{CloudProvider: f.ctrl.Cloud, fail: true}
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	res := f.run()
	held := false
	for _, b := range res.Plan.Blocked {
		held = held || (b.Reason == scaledown.ReasonGroupHeld && strings.Contains(b.Message, "could not refresh"))
	}
	if len(res.Started) != 0 || !held {
		t.Fatalf("refresh failing: started %v, blocked %+v; want no removal, the group held", res.Started, res.Plan.Blocked)
	}
	cloud.fail = false
	if res := f.run(); len(res.Started) != 1 {
		t.Errorf("refreshed: started %v, want the empty node", res.Started)
	}
}
