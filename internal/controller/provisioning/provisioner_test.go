package provisioning_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/provisioning"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/scenario"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	provisioning.RegisterMetrics() // as the controller does: tests read them
	testenv.Main(m, &env)
}

type fixture struct {
	t         *testing.T
	created   int
	ns        string
	group     string
	prov      *provisioning.Provisioner
	offerings *state.Offerings
	events    *fakes.Recorder
}

// setup creates a namespace and a node group, and a provisioner that talks
// to the real API server. Everything is deleted when the test ends.
func setup(t *testing.T, ng *v1alpha1.NodeGroup) *fixture {
	t.Helper()
	ctx := context.Background()
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	if len(ns) > 40 {
		ns = ns[:40]
	}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, ng} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		_ = env.Client.Delete(ctx, ng)
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: ng.Name})
	})
	f := &fixture{t: t, ns: ns, group: ng.Name, offerings: state.NewOfferings(clock.RealClock{}, time.Minute), events: &fakes.Recorder{}}
	f.useCloud(kwok.New(env.Client, clock.RealClock{}))
	return f
}

// alsoGroup creates a second node group for the test, deleted with its
// nodes when the test ends.
func (f *fixture) alsoGroup(ng *v1alpha1.NodeGroup) {
	f.t.Helper()
	if err := env.Client.Create(context.Background(), ng); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), ng)
		_ = env.Client.DeleteAllOf(context.Background(), &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: ng.Name})
	})
}

// useCloud gives the fixture a new provisioner that launches with cloud.
func (f *fixture) useCloud(cloud cloudprovider.CloudProvider) {
	f.prov = provisioning.New(provisioning.Deps{
		Client: env.Client, Cloud: cloud, Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{},
	}, provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute, Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits},
		MaxProvisionTime: 15 * time.Minute})
}

// brokenGroup is a cloud provider whose launches in one node group fail
// with an error that is not about capacity (a webhook that rejects the
// node, a bad image, an API quota), and that launches the others with KWOK.
type brokenGroup struct {
	cloudprovider.CloudProvider
	group string
	calls int
}

func (c *brokenGroup) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	if req.NodeGroup.Name == c.group {
		c.calls++
		return nil, errors.New("admission webhook \"nodes.example.com\" denied the request")
	}
	return c.CloudProvider.Create(ctx, req)
}

// pods creates pending pods that select the fixture's node group, and waits
// until the scheduler has marked them unschedulable.
func (f *fixture) pods(n int, opts ...b.PodOption) []*corev1.Pod {
	f.t.Helper()
	ctx := context.Background()
	var out []*corev1.Pod
	for range n {
		f.created++
		p := b.Pod(fmt.Sprintf("p-%d", f.created), append([]b.PodOption{b.Namespace(f.ns), b.NoUID(), b.NodeSelector(v1alpha1.LabelNodeGroup, f.group)}, opts...)...)
		if err := env.Client.Create(ctx, p); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, p)
	}
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, p := range out {
			got := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return false, "", err
			}
			if !podutil.IsProvisionable(got) {
				return false, "pod " + got.Name + " not marked unschedulable yet", nil
			}
		}
		return true, "", nil
	})
	return out
}

func (f *fixture) nodes() []corev1.Node {
	f.t.Helper()
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group}); err != nil {
		f.t.Fatal(err)
	}
	return nodes.Items
}

func (f *fixture) run() *provisioning.Result {
	f.t.Helper()
	res, err := f.prov.RunOnce(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// TestLaunchesThePlanAndNothingTwice: the nodes launched are the planned
// ones, and a second round while they are still booting launches nothing.
func TestLaunchesThePlanAndNothingTwice(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-plan",
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.16")),
		b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	pods := f.pods(5, b.CPU("1500m"))
	_, incremental := snapshotBuilds(t)
	res := f.run()
	if len(res.Launched) != len(res.Plan.NewNodes) || len(res.Launched) == 0 {
		t.Fatalf("launched %d nodes for a plan of %d", len(res.Launched), len(res.Plan.NewNodes))
	}
	// 5 x 1.5 cpu: two m-4 (2 pods each) and one m-2 is the cheapest (0.42).
	if res.Plan.PricePerHour > 0.42+1e-9 {
		t.Errorf("plan costs %.2f/h, want at most 0.42", res.Plan.PricePerHour)
	}
	if got := len(f.nodes()); got != len(res.Launched) {
		t.Errorf("%d nodes exist, %d launched", got, len(res.Launched))
	}
	for _, n := range f.nodes() {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				t.Errorf("node %s is Ready during its launch delay", n.Name)
			}
		}
	}
	// Each pod is nominated to the node launched for it, so the scheduler
	// places it as planned, and it is not planned again. The scheduler may
	// already have cleared a nomination when it retried the pod against the
	// booting node (it does so under load); the pod's event says which node
	// berth launched for it either way.
	launched := map[string]bool{}
	for _, inst := range res.Launched {
		launched[inst.NodeName] = true
	}
	for _, p := range pods {
		got := &corev1.Pod{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		if n := got.Status.NominatedNodeName; n != "" && !launched[n] {
			t.Errorf("pod %s nominated to %q, not to a launched node", got.Name, n)
		}
		ev := f.events.For(got.Namespace + "/" + got.Name)
		var forNode string
		for _, e := range ev {
			if e.Reason == provisioning.ReasonTriggeredScaleUp {
				if _, err := fmt.Sscanf(e.Message, "Launching node %s", &forNode); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !launched[forNode] {
			t.Errorf("pod %s: TriggeredScaleUp events %+v, want one naming a launched node", got.Name, ev)
		}
	}
	// The scheduler may clear the nominations while the nodes boot (this
	// test runs no nomination keeper); either way the second round must
	// launch nothing and keep the pods on the nodes launched for them.
	again := f.run()
	if len(again.Launched) != 0 {
		t.Errorf("second round launched %d more nodes", len(again.Launched))
	}
	for _, pl := range again.Plan.ExistingNodePlacements {
		if !launched[pl.Node] {
			t.Errorf("second round put %s on %s, not on a node launched for it", pl.Pod, pl.Node)
		}
	}
	// If the nominated nodes go away, the pods need nodes again.
	for name := range launched {
		if err := env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	third := f.run()
	if third.Pending != 5 || len(third.Launched) == 0 {
		t.Errorf("after the nodes were deleted: %d pending, %d launched; want 5 pending and new nodes", third.Pending, len(third.Launched))
	}
	// The later rounds planned on the model of the cluster the first one
	// built, brought up to date (nodes launched, then deleted).
	if _, now := snapshotBuilds(t); now-incremental < 1 {
		t.Errorf("no round after the first planned on the model brought up to date (berth_provisioning_snapshot_builds_total{how=\"incremental\"} %v -> %v)", incremental, now)
	}
	for _, e := range f.events.Events {
		if e.Reason == provisioning.ReasonTriggeredScaleUp && strings.Contains(e.Message, "Launching node prov-plan-") {
			return
		}
	}
	t.Errorf("no TriggeredScaleUp event on the pods: %+v", f.events.Events)
}

// TestFallsBackWhenAnOfferingHasNoCapacity: the cheapest offering fails; the
// round plans again without it and launches the next cheapest; the failure
// is remembered.
func TestFallsBackWhenAnOfferingHasNoCapacity(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-fallback",
		b.InstanceType("m-2", "2", "8Gi", b.Spot("zone-a", "0.03"), b.OnDemand("zone-a", "0.10")),
		b.FailOffering(v1alpha1.OfferingSelector{CapacityType: v1alpha1.CapacityTypeSpot})))
	f.pods(1, b.CPU("1"))
	res := f.run()
	if len(res.Failed) != 1 || res.Failed[0].CapacityType != "spot" {
		t.Errorf("failed offerings %+v, want the spot one", res.Failed)
	}
	if len(res.Launched) != 1 || res.Launched[0].Offering.CapacityType != v1alpha1.CapacityTypeOnDemand {
		t.Fatalf("launched %+v, want one on-demand node", res.Launched)
	}
	if u := f.offerings.Unavailable(); len(u) != 1 || u[0].CapacityType != "spot" {
		t.Errorf("unavailable offerings %+v", u)
	}
	found := false
	for _, e := range f.events.For("prov-fallback") {
		found = found || e.Reason == provisioning.ReasonLaunchFailed
	}
	if !found {
		t.Errorf("no LaunchFailed event on the node group: %+v", f.events.Events)
	}
}

// TestALaunchErrorStopsOnlyItsOffering: launches in one node group fail
// with an error that is not about capacity. The round does not fail: the
// other group's pod gets its node, the broken offering is avoided (and not
// tried again next round), the pod that needs it is told why.
func TestALaunchErrorStopsOnlyItsOffering(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-healthy", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	broken := b.NodeGroup("prov-broken", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.05")))
	if err := env.Client.Create(context.Background(), broken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), broken) })
	cloud := &brokenGroup{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: broken.Name}
	f.useCloud(cloud)
	f.pods(1, b.CPU("1"))
	other := &fixture{t: t, ns: f.ns, group: broken.Name, created: 100}
	waiting := other.pods(1, b.CPU("1"))

	res := f.run() // fails the test if the round returns an error
	if len(res.Launched) != 1 || res.Launched[0].NodeGroup != f.group {
		t.Errorf("launched %+v, want one node of the healthy group", res.Launched)
	}
	if u := f.offerings.Unavailable(); len(u) != 1 || u[0].NodeGroup != broken.Name {
		t.Errorf("unavailable offerings %+v, want the broken group's one", u)
	}
	f.run()
	if cloud.calls != 1 {
		t.Errorf("the broken offering was tried %d times in two rounds, want once (it backs off)", cloud.calls)
	}
	if ev := f.events.For(waiting[0].Namespace + "/" + waiting[0].Name); len(ev) == 0 || ev[len(ev)-1].Reason != provisioning.ReasonNotTriggerScaleUp {
		t.Errorf("events on the pod whose only offering fails: %+v, want NotTriggerScaleUp", ev)
	}
}

// TestExplainsPodsNoGroupFits: an impossible pod gets a NotTriggerScaleUp
// event with the reason and no node; a possible one still gets its node.
func TestExplainsPodsNoGroupFits(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-explain", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	huge := f.pods(1, b.CPU("64"))[0]
	f.pods(1, b.CPU("1"))
	res := f.run()
	if len(res.Launched) != 1 {
		t.Errorf("launched %d nodes, want 1 for the pod that fits", len(res.Launched))
	}
	var msgs []string
	for _, e := range f.events.For(huge.Namespace + "/" + huge.Name) {
		msgs = append(msgs, e.Reason+": "+e.Message)
	}
	want := "NotTriggerScaleUp: No node can be launched for this pod: 0/1 node groups fit: prov-explain: insufficient cpu (needs 64, max 2)"
	if len(msgs) != 1 || msgs[0] != want {
		t.Errorf("events on the impossible pod: %q, want [%q]", msgs, want)
	}
	f.run()
	if n := len(f.events.For(huge.Namespace + "/" + huge.Name)); n != 1 {
		t.Errorf("the same reason was recorded %d times over two rounds, want once", n)
	}
}

// TestBringsGroupsUpToMinSize: a group below minSize gets nodes without
// any pending pod.
func TestBringsGroupsUpToMinSize(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-min", b.Size(2, 5), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.10"))))
	res := f.run()
	if len(res.Launched) != 2 {
		t.Fatalf("launched %d nodes, want 2 for minSize", len(res.Launched))
	}
	zones := map[string]bool{}
	for _, n := range f.nodes() {
		zones[n.Labels[v1alpha1.LabelZone]] = true
	}
	if len(zones) != 2 {
		t.Errorf("minSize nodes in zones %v, want both zones", zones)
	}
	if again := f.run(); len(again.Launched) != 0 {
		t.Errorf("second round launched %d more", len(again.Launched))
	}
}

// TestPodWhoseRoomWasTakenGetsANodeSoon: berth launched a node for a pod,
// but before the pod was bound something else took the room (here a pod
// bound straight to the node; in real clusters the scheduler placing
// another pod there). The pod still carries its nomination, so no event
// says it needs a node; berth must notice when the nomination's grace ends
// and launch another node, not wait for the periodic resync (10 minutes
// here). The provisioner runs as the controller does: informers, triggers,
// batching.
func TestPodWhoseRoomWasTakenGetsANodeSoon(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ng := b.NodeGroup("prov-lost", b.Size(0, 5), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: 3 * time.Second}))
	f := setup(t, ng)
	f.runAsTheController(ctx)

	wants := f.pods(1, b.CPU("1500m"))[0]
	var first string
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wants), got); err != nil {
			return false, "", err
		}
		first = got.Status.NominatedNodeName
		return first != "", "no node launched and nominated yet", nil
	})
	// Take the room while the node boots.
	thief := b.Pod("thief", b.Namespace(f.ns), b.NoUID(), b.NodeName(first), b.CPU("1500m"))
	if err := env.Client.Create(ctx, thief); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	expect.Eventually(t, 45*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wants), got); err != nil {
			return false, "", err
		}
		ok := got.Spec.NodeName != "" && got.Spec.NodeName != first && got.Status.Phase == corev1.PodRunning
		return ok, fmt.Sprintf("%d nodes; pod on %q (%s), nominated to %q", len(f.nodes()), got.Spec.NodeName, got.Status.Phase, got.Status.NominatedNodeName), nil
	})
	t.Logf("the pod whose room was taken ran on a second node %s after the room was taken", time.Since(start).Round(100*time.Millisecond))
	if n := len(f.nodes()); n != 2 {
		t.Errorf("%d nodes, want 2 (one more for the pod, nothing more)", n)
	}
}

// runAsTheController runs a provisioner as the controller does (a
// manager's cache and informers, triggers, batching) until ctx ends.
func (f *fixture) runAsTheController(ctx context.Context) {
	f.t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", LeaderElection: false})
	if err != nil {
		f.t.Fatal(err)
	}
	prov := provisioning.New(provisioning.Deps{
		Client: mgr.GetClient(), Cloud: kwok.New(mgr.GetClient(), clock.RealClock{}), Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{},
	}, provisioning.Options{BatchIdle: 200 * time.Millisecond, BatchMax: time.Second, Resync: 10 * time.Minute,
		Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits}, MaxProvisionTime: 15 * time.Minute})
	if err := prov.Register(mgr); err != nil {
		f.t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
}

// TestVirtualUnitsOfAllHeadroomsAreCapped: each Headroom is bounded on its
// own, and all of them together are bounded per round: with a cap of 5,
// two Headrooms of 4 units plan 5 units, shared fairly (3 and 2, not 4 and
// 1 by name), and both get a VirtualUnitsCapped event.
func TestVirtualUnitsOfAllHeadroomsAreCapped(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("prov-capped", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	f.prov = provisioning.New(provisioning.Deps{
		Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}), Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{},
	}, provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute, Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits},
		MaxProvisionTime: 15 * time.Minute, MaxVirtualPods: 5})
	shape := v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	for _, name := range []string{"capped-a", "capped-b"} {
		h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.HeadroomSpec{
			Scope: v1alpha1.HeadroomScope{NodeGroups: []string{f.group}}, Units: &v1alpha1.HeadroomUnits{Count: 4, UnitShape: shape}}}
		if err := env.Client.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), h) })
		h.Status = v1alpha1.HeadroomStatus{DesiredUnits: 4, Unit: &shape}
		if err := env.Client.Status().Update(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		res, err := f.prov.RunOnce(ctx)
		if err != nil {
			return false, "", err
		}
		planned := len(res.Plan.ExistingNodePlacements)
		for _, nn := range res.Plan.NewNodes {
			planned += len(nn.Pods)
		}
		return planned == 5, fmt.Sprintf("%d units planned, want 5", planned), nil
	})
	var capped []string
	for _, e := range f.events.Events {
		if e.Reason == provisioning.ReasonVirtualUnitsCapped {
			capped = append(capped, e.Object)
		}
	}
	if len(capped) != 2 {
		t.Errorf("VirtualUnitsCapped events on %v, want one on each Headroom", capped)
	}
}

// TestLearnedUnitsGetANodeThatHoldsThemWhole: a Headroom whose status
// keeps one unit of 500m and one learned unit of 6 cpu (a shape its
// target learned from pods of 6 cpu) makes the provisioner plan a node of
// 8 cpu for the learned unit: 6 cpu in one piece, which no node of 2 cpu
// holds, however many.
func TestLearnedUnitsGetANodeThatHoldsThemWhole(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("prov-learned", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.50"))))
	shape := v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "learned"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{f.group}}, Units: &v1alpha1.HeadroomUnits{Count: 1, UnitShape: shape}}}
	if err := env.Client.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), h) })
	h.Status = v1alpha1.HeadroomStatus{DesiredUnits: 2, Unit: &shape,
		LearnedUnits: []v1alpha1.LearnedUnits{{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}, Count: 1}}}
	if err := env.Client.Status().Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		res, err := f.prov.RunOnce(ctx)
		if err != nil {
			return false, "", err
		}
		var got []string
		units := 0
		for _, nn := range res.Plan.NewNodes {
			got = append(got, fmt.Sprintf("%s with %d units", nn.InstanceType, len(nn.Pods)))
			units += len(nn.Pods)
		}
		return units == 2 && len(got) == 1 && strings.HasPrefix(got[0], "m-8"), fmt.Sprintf("new nodes %v, want one m-8 with both units", got), nil
	})
}

// TestANewLeaderAvoidsWhatThePreviousOneAvoided: the previous leader's
// failed offering is in the NodeGroup's status; a new provisioner (a new
// leader, with empty memory) does not launch it, and launches the next
// cheapest offering instead.
func TestANewLeaderAvoidsWhatThePreviousOneAvoided(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("prov-recover", b.InstanceType("m-2", "2", "8Gi", b.Spot("zone-a", "0.03"), b.OnDemand("zone-a", "0.10")))
	f := setup(t, ng)
	ng.Status.UnavailableOfferings = []v1alpha1.UnavailableOffering{{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeSpot,
		Until: metav1.NewTime(time.Now().Add(10 * time.Minute)), Streak: 2, Message: "quota exceeded"}}
	if err := env.Client.Status().Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &v1alpha1.NodeGroup{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got)
		return err == nil && len(got.Status.UnavailableOfferings) == 1, "status not visible yet", err
	})
	f.pods(1, b.CPU("1"))
	res := f.run()
	if len(res.Launched) != 1 || res.Launched[0].Offering.CapacityType != v1alpha1.CapacityTypeOnDemand {
		t.Errorf("launched %+v, want one on-demand node (spot is still avoided)", res.Launched)
	}
	if u := f.offerings.Unavailable(); len(u) != 1 || u[0].CapacityType != "spot" {
		t.Errorf("unavailable offerings after recovery %+v, want the spot one", u)
	}
}

// TestBerthPlanAndTheControllerPlanTheSamePods: the pods of a namespace
// are dumped from the API server as `kubectl get pods -o yaml` would, and
// loaded by `berth plan`'s loader; the pods it plans are exactly the ones
// the controller's round plans: pods the scheduler found no node for, not
// gated ones, not ones the scheduler has not tried, not bound ones.
func TestBerthPlanAndTheControllerPlanTheSamePods(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("prov-same", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	f.pods(2, b.CPU("1"))
	for _, p := range []*corev1.Pod{
		b.Pod("gated", b.Namespace(f.ns), b.NoUID(), b.CPU("1"), b.NodeSelector(v1alpha1.LabelNodeGroup, f.group)),
		b.Pod("untried", b.Namespace(f.ns), b.NoUID(), b.CPU("1"), b.NodeSelector(v1alpha1.LabelNodeGroup, f.group)),
	} {
		if p.Name == "gated" {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		} else {
			p.Spec.SchedulerName = "no-such-scheduler"
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	res := f.run()
	var controller []string
	for _, p := range res.PendingPods {
		if p.Namespace == f.ns {
			controller = append(controller, p.String())
		}
	}

	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	for i := range pods.Items {
		p := pods.Items[i]
		p.APIVersion, p.Kind = "v1", "Pod"
		data, err := sigsyaml.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		dump.WriteString("---\n")
		dump.Write(data)
	}
	sc, err := scenario.Load(&dump)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sc.Input(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for _, p := range in.Pending {
		plan = append(plan, p.Namespace+"/"+p.Name)
	}
	slices.Sort(plan)
	if diff := cmp.Diff(controller, plan); diff != "" {
		t.Errorf("pods planned (-controller +berth plan):\n%s", diff)
	}
	if len(controller) != 2 {
		t.Errorf("the controller planned %v, want the 2 unschedulable pods", controller)
	}
}

// TestANewLeaderPlansAgainForAPodNominatedToAFullNode: a previous leader
// nominated a pod to a node that has since filled up; the new leader holds
// the pod there only for its grace, then plans a node for it (it was held
// there for ever).
func TestANewLeaderPlansAgainForAPodNominatedToAFullNode(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("prov-stale-nom", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	f := setup(t, ng)
	first := f.pods(1, b.CPU("1500m"))[0]
	f.run()
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), first)
		return err == nil && first.Spec.NodeName != "" && first.Status.Phase == corev1.PodRunning, "the first pod does not run yet", err
	})
	full := first.Spec.NodeName
	// A pod the scheduler does not handle (no such scheduler), nominated to
	// the full node as a previous leader would have left it.
	p := b.Pod("stale", b.Namespace(f.ns), b.NoUID(), b.CPU("1"), b.NodeSelector(v1alpha1.LabelNodeGroup, ng.Name),
		func(p *corev1.Pod) { p.Spec.SchedulerName = "no-such-scheduler" })
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: full, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.useCloud(kwok.New(env.Client, clock.RealClock{})) // a new leader: empty memory
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		res := f.run()
		return len(res.Launched) == 1, fmt.Sprintf("launched %d nodes for the stale pod", len(res.Launched)), nil
	})
}

// flakyAPI is a cloud whose first launch fails with an API conflict.
type flakyAPI struct {
	cloudprovider.CloudProvider
	failed bool
}

func (c *flakyAPI) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	if !c.failed {
		c.failed = true
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "x", errors.New("the object has been modified"))
	}
	return c.CloudProvider.Create(ctx, req)
}

// TestATransientAPIErrorDoesNotBackOffTheOffering: a launch that fails
// because the API call did (a conflict) leaves the offering available;
// the next round launches it.
func TestATransientAPIErrorDoesNotBackOffTheOffering(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-flaky", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	f.useCloud(&flakyAPI{CloudProvider: kwok.New(env.Client, clock.RealClock{})})
	f.pods(1, b.CPU("1"))
	if _, err := f.prov.RunOnce(context.Background()); err == nil {
		t.Fatal("the round with a failed API call reported no error (it is retried)")
	}
	if u := f.offerings.Unavailable(); len(u) != 0 {
		t.Fatalf("unavailable offerings %v after a transient API error, want none", u)
	}
	if res := f.run(); len(res.Launched) != 1 {
		t.Errorf("launched %d nodes in the next round, want 1 of the same offering", len(res.Launched))
	}
}

// otherLauncher is a cloud through which, right before the provisioner's
// first launch, another launcher of the process (the standby tier) takes
// the group's last place: the round's view does not show that node.
type otherLauncher struct {
	cloudprovider.CloudProvider
	took bool
}

func (c *otherLauncher) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	if !c.took {
		c.took = true
		if _, err := c.CloudProvider.Create(ctx, req); err != nil {
			return nil, err
		}
	}
	return c.CloudProvider.Create(ctx, req)
}

// TestALaunchRefusedAtMaxSizeIsNotTheOfferingsFault: the cheaper group
// (maxSize 1) fills between the round's view and its launch. The
// provider refuses the launch; the round neither fails nor avoids the
// offering: it plans again without the full group and launches in the
// other one, and the full group keeps 1 node.
func TestALaunchRefusedAtMaxSizeIsNotTheOfferingsFault(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-full", b.Size(0, 1), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.TemplateLabel("pool", "prov-full"), b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	other := b.NodeGroup("prov-full-b", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")),
		b.TemplateLabel("pool", "prov-full"), b.LaunchDelay(metav1.Duration{Duration: time.Hour}))
	f.alsoGroup(other)
	f.useCloud(&otherLauncher{CloudProvider: kwok.New(env.Client, clock.RealClock{})})
	f.poolPod("either-group", "prov-full", "1")
	res, err := f.prov.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("the round failed: %v", err)
	}
	if len(res.Launched) != 1 || res.Launched[0].NodeGroup != other.Name || len(res.Failed) != 0 {
		t.Errorf("launched %+v, failed offerings %v; want one node of %s and no offering failed", res.Launched, res.Failed, other.Name)
	}
	if u := f.offerings.Unavailable(); len(u) != 0 {
		t.Fatalf("unavailable offerings %v after a launch refused at maxSize, want none", u)
	}
	if n := len(f.nodes()); n != 1 {
		t.Errorf("the full group has %d nodes, want 1 (its maxSize)", n)
	}
}

// snapshotBuilds reads berth_provisioning_snapshot_builds_total: the
// rounds whose model of the cluster was built from scratch, and those
// that brought the last round's up to date.
func snapshotBuilds(t *testing.T) (scratch, incremental float64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "berth_provisioning_snapshot_builds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "how" && l.GetValue() == "scratch":
					scratch = m.GetCounter().GetValue()
				case l.GetName() == "how" && l.GetValue() == "incremental":
					incremental = m.GetCounter().GetValue()
				}
			}
		}
	}
	return scratch, incremental
}

// TestPendingPodsFillASuspendedStandbyNodeBeforeANewOne: 3 pods of 1 cpu
// and a suspended 2-cpu standby node: the plan puts 2 pods on the
// standby node, which the round resumes and nominates them to, and
// launches one node for the third; the next round launches nothing more
// while the cache may still show the node suspended.
func TestPendingPodsFillASuspendedStandbyNodeBeforeANewOne(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("resume", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	inst := f.suspendedStandbyNode("m-2")
	pods := f.pods(3, b.CPU("1"), b.Memory("1Gi"))
	res, err := f.prov.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Launched) != 2 {
		t.Fatalf("launched %d nodes for 3 pods of 1 cpu on 2-cpu nodes, want 2", len(res.Launched))
	}
	names := map[string]bool{}
	for _, n := range f.nodes() {
		names[n.Name] = true
	}
	if len(names) != 2 || !names[inst.NodeName] {
		t.Fatalf("nodes %v: want the resumed standby node %s and one launched", names, inst.NodeName)
	}
	resumed := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, resumed); err != nil {
		t.Fatal(err)
	}
	if nodeutil.Standby(resumed) || resumed.Annotations[v1alpha1.AnnotationSuspendedAt] != "" || resumed.Annotations[v1alpha1.AnnotationResumedAt] == "" {
		t.Errorf("resumed node: taints %v, annotations %v", resumed.Spec.Taints, resumed.Annotations)
	}
	planned := map[string]int{}
	for _, pl := range res.Plan.ExistingNodePlacements {
		planned[pl.Node]++
	}
	on := map[string]int{}
	for _, p := range pods {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		node := got.Spec.NodeName // bound already if its node came up
		if node == "" {
			node = got.Status.NominatedNodeName
		}
		on[node]++
	}
	// The scheduler may clear a nomination to a node that is not Ready
	// yet when it retries the pod (the running controller restores it,
	// onPodUpdate; RunOnce alone does not): a pod may show no node, but
	// none may be bound or nominated elsewhere than the plan's two nodes.
	mine := 0 // pods of earlier tests may still be pending in their namespaces
	for _, p := range res.PendingPods {
		if p.Namespace == f.ns {
			mine++
		}
	}
	if planned[inst.NodeName] != 2 || mine != 3 || on[inst.NodeName]+on[""] < 2 || len(on) > 3 {
		t.Errorf("planned on existing nodes %v, pods bound or nominated per node %v; want 2 planned on the resumed node %s, 3 pods planned, and no other node",
			planned, on, inst.NodeName)
	}
	if !slices.ContainsFunc(f.events.For(f.group), func(e fakes.Event) bool { return strings.Contains(e.Message, "Resumed standby node "+inst.NodeName) }) {
		t.Errorf("no event on the node group says the standby node was resumed: %+v", f.events.For(f.group))
	}
	again, err := f.prov.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Launched) != 0 {
		t.Errorf("the next round launched %d more nodes", len(again.Launched))
	}
}

// TestASuspendedNodeOfAnotherInstanceTypeIsResumed: a suspended 8-cpu
// standby node takes 3 pods of 1 cpu although the cheapest new node for
// them would be 2-cpu ones: resuming it launches nothing.
func TestASuspendedNodeOfAnotherInstanceTypeIsResumed(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("resume-other", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.05")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.80"))))
	inst := f.suspendedStandbyNode("m-8")
	f.pods(3, b.CPU("1"), b.Memory("1Gi"))
	res, err := f.prov.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Launched) != 1 || res.Launched[0].NodeName != inst.NodeName {
		t.Fatalf("launched %+v, want only the resumed standby node %s", res.Launched, inst.NodeName)
	}
	if n := len(f.nodes()); n != 1 {
		t.Errorf("%d nodes, want the one resumed", n)
	}
}

// suspendedStandbyNode launches a standby node of the fixture's group in
// zone-a, waits for KWOK to make it Ready, and suspends it.
func (f *fixture) suspendedStandbyNode(instanceType string) *cloudprovider.Instance {
	f.t.Helper()
	ctx := context.Background()
	ng := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.group}, ng); err != nil {
		f.t.Fatal(err)
	}
	cloud := kwok.New(env.Client, clock.RealClock{})
	inst, err := cloud.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, StandbyFor: "web",
		Offering: cloudprovider.Offering{InstanceType: instanceType, Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
	if err != nil {
		f.t.Fatal(err)
	}
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, n)
		return err == nil && nodeutil.Ready(n), "standby node not Ready yet", err
	})
	if err := cloud.Suspend(ctx, inst.NodeName); err != nil {
		f.t.Fatal(err)
	}
	return inst
}

// TestABurstIsPlannedWhole: a ReplicaSet of six 1-cpu pods that the
// scheduler has tried only one of so far (they name a scheduler that does
// not run: the test marks the one pod as kube-scheduler would). The round
// plans the six: one m-8 node, not an m-2 for the one pod marked, which
// would leave the others to rounds that each see a slice. A pod of another
// ReplicaSet that no scheduler tried is not planned.
func TestABurstIsPlannedWhole(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("prov-burst",
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.28")),
		b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	replicaSet := func(name string, replicas int32) {
		labels := map[string]string{"app": name}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				SchedulerName: "not-running",
				NodeSelector:  map[string]string{v1alpha1.LabelNodeGroup: f.group},
				Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			}},
		}}
		if err := env.Client.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	replicaSet("burst", 6)
	replicaSet("alone", 1)
	var burst []corev1.Pod
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
			return false, "", err
		}
		burst = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Labels["app"] != "burst" })
		return len(pods.Items) == 7 && len(burst) == 6, fmt.Sprintf("%d pods created", len(pods.Items)), nil
	})
	first := &burst[0]
	patch := client.MergeFrom(first.DeepCopy())
	first.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Patch(ctx, first, patch); err != nil {
		t.Fatal(err)
	}
	res := f.run()
	var want []types.NamespacedName
	for _, p := range burst {
		want = append(want, client.ObjectKeyFromObject(&p))
	}
	slices.SortFunc(want, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	// Other tests' pods may still wait in namespaces being deleted.
	planned := slices.DeleteFunc(slices.Clone(res.PendingPods), func(k types.NamespacedName) bool { return k.Namespace != f.ns })
	if diff := cmp.Diff(want, planned); diff != "" {
		t.Errorf("planned pods (-the burst +planned):\n%s", diff)
	}
	var kinds []string
	for _, nn := range res.Plan.NewNodes {
		if nn.NodeGroup == f.group {
			kinds = append(kinds, nn.InstanceType)
		}
	}
	if !slices.Equal(kinds, []string{"m-8"}) {
		t.Errorf("planned nodes of types %v, want one m-8 for the six pods", kinds)
	}
}

// TestARoundLaunchesNoMoreThanItsCap: with --max-nodes-per-round 1, three
// pods that each need a node of their own get one node a round; the pods
// left wait with the cap named on them (NotTriggerScaleUp), and no round
// launches a second node for a pod the round before launched one for.
func TestARoundLaunchesNoMoreThanItsCap(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-cap",
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	f.prov = provisioning.New(provisioning.Deps{
		Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}), Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{},
	}, provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute, Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{PerRound: 1}}, MaxProvisionTime: 15 * time.Minute})
	pods := f.pods(3, b.CPU("1500m"))
	for round := 1; round <= 4; round++ {
		res := f.run()
		want := min(1, 3-(round-1))
		if len(res.Launched) != want {
			t.Fatalf("round %d launched %d nodes, want %d", round, len(res.Launched), want)
		}
		if got := len(f.nodes()); got != min(round, 3) {
			t.Fatalf("after round %d: %d nodes, want %d", round, got, min(round, 3))
		}
	}
	capped := 0
	for _, p := range pods {
		for _, e := range f.events.For(f.ns + "/" + p.Name) {
			if e.Reason == v1alpha1.EventReasonNotTriggerScaleUp && strings.Contains(e.Message, "round at its cap of 1 nodes launched (--max-nodes-per-round") {
				capped++
				break
			}
		}
	}
	// Round 1 leaves two pods waiting, round 2 one.
	if capped != 2 {
		t.Errorf("%d pods were told they wait for the round's cap, want 2: %+v", capped, f.events.Events)
	}
}

// TestARoundThatReplansAfterAFailedLaunchStaysWithinItsCap (a review): a
// launch that fails makes the round plan again, and the plan again
// launches only what the round's cap has left. Here the cap is 2: the
// cheaper zone-b fails, so the first plan launches one node of its two;
// before, the plan again had a cap of its own and the round launched 3.
func TestARoundThatReplansAfterAFailedLaunchStaysWithinItsCap(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-cap-retry",
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.05")),
		b.FailOffering(v1alpha1.OfferingSelector{Zone: "zone-b"}),
		b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	f.prov = provisioning.New(provisioning.Deps{Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}),
		Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{}},
		provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute,
			Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{PerRound: 2}}, MaxProvisionTime: 15 * time.Minute})
	f.pods(1, b.CPU("1500m"), b.NodeSelector(v1alpha1.LabelZone, "zone-a"))
	f.pods(4, b.CPU("1500m"))
	if res := f.run(); len(res.Launched) != 2 {
		t.Errorf("one round launched %d nodes, want its cap of 2", len(res.Launched))
	}
	if got := len(f.nodes()); got != 2 {
		t.Errorf("%d nodes after the round, want 2", got)
	}
}

// TestAResumedStandbyNodeTakesNoLaunchFromTheReplan (a review): a
// resumed standby node is no node the round launches: the first plan
// does not count it against --max-nodes-per-round, so the plan again
// after a failed launch must not either. Cap 1: the plan resumes the
// standby node for two pods and launches one node in the cheaper zone-b
// for the third, which fails; the plan again should launch that node in
// zone-a, but the round stops (res.Launched counts the resume).
func TestAResumedStandbyNodeTakesNoLaunchFromTheReplan(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("rev-resume-cap",
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.05")),
		b.FailOffering(v1alpha1.OfferingSelector{Zone: "zone-b"})))
	f.suspendedStandbyNode("m-2")
	f.prov = provisioning.New(provisioning.Deps{Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}),
		Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{}},
		provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute,
			Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{PerRound: 1}}, MaxProvisionTime: 15 * time.Minute})
	f.pods(3, b.CPU("1"), b.Memory("1Gi"))
	res, err := f.prov.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 {
		t.Fatalf("failed %v, want the zone-b launch", res.Failed)
	}
	if len(res.Launched) != 2 {
		t.Errorf("launched/resumed %d, want the standby node resumed and one node launched in zone-a (cap 1)", len(res.Launched))
	}
}

// TestTheNodesCountedAgainstTheCapAreExported: the round publishes how
// many nodes it counts against --max-nodes-total (every node in the
// cluster but a virtual kubelet's) and the cap, for an alert before the
// cluster reaches it.
func TestTheNodesCountedAgainstTheCapAreExported(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-count", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	virtual := b.Node("prov-count-virtual", "10k", "4Ti", b.NodeLabels("type", "virtual-kubelet"))
	if err := env.Client.Create(context.Background(), virtual); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), virtual) })
	f.prov = provisioning.New(provisioning.Deps{Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}), Offerings: f.offerings,
		Recorder: f.events, Clock: clock.RealClock{}}, provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute,
		Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{Total: 500}}, MaxProvisionTime: 15 * time.Minute})
	f.pods(2, b.CPU("1500m"))
	f.run()
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		f.run()
		nodes := &corev1.NodeList{}
		if err := env.Client.List(ctx, nodes); err != nil {
			return false, "", err
		}
		got, limit := gauge(t, "berth_provisioning_cluster_nodes"), gauge(t, "berth_provisioning_max_nodes_total")
		want := float64(len(nodes.Items) - 1) // not the virtual kubelet's
		return got == want && limit == 500, fmt.Sprintf("cluster_nodes %v, max_nodes_total %v; want %v and 500", got, limit, want), nil
	})
}

// gauge reads a gauge without labels from controller-runtime's registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
