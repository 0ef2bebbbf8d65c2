package disruption_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/disruption"
)

// lazyDelete accepts the first removals of each node (one, or ignore) and
// does nothing (a Cluster API MachineSet that matched the lowered replicas
// with another Machine); later removals are done.
type lazyDelete struct {
	cloudprovider.CloudProvider
	mu     sync.Mutex
	asked  map[string]int
	ignore int
}

func (c *lazyDelete) Delete(ctx context.Context, node string) error {
	c.mu.Lock()
	c.asked[node]++
	ignored := c.asked[node] <= max(c.ignore, 1)
	c.mu.Unlock()
	if ignored {
		return nil
	}
	return c.CloudProvider.Delete(ctx, node)
}

func (c *lazyDelete) times(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked[node]
}

// TestARemovalTheProviderAcceptedButDidNotDoIsAskedAgain: the group's one
// empty node is drained and its removal accepted, but the node stays. It
// is not asked again every round; after DeleteRetryInterval it is (past
// the drain timeout too: the drain is over), the node goes, and the
// removal is counted and announced once.
func TestARemovalTheProviderAcceptedButDidNotDoIsAskedAgain(t *testing.T) {
	f := setup(t, "sd-lazy-delete", 1)
	cloud := &lazyDelete{CloudProvider: f.ctrl.Cloud, asked: map[string]int{}}
	f.ctrl.Cloud = cloud
	var victim string
	removed := 0
	for range 5 {
		res := f.run()
		if victim == "" && len(res.Started) > 0 {
			victim = res.Started[0]
		}
		removed += len(res.Removed)
	}
	if victim == "" || cloud.times(victim) != 1 {
		t.Fatalf("drained %q, asked the provider %d times in 5 rounds, want one node asked once", victim, cloud.times(victim))
	}
	if f.node(victim) == nil {
		t.Fatalf("node %s gone though the provider did nothing", victim)
	}
	// Past the drain timeout (5 minutes here) too: the drain is over, and
	// only the provider's removal is awaited.
	f.clk.Step(6 * time.Minute)
	res := f.run()
	removed += len(res.Removed)
	if got := cloud.times(victim); got != 2 || len(res.GivenUp) != 0 {
		t.Fatalf("asked the provider %d times after 6 minutes, gave up %v; want it asked again and nothing given up", got, res.GivenUp)
	}
	if f.node(victim) != nil {
		t.Errorf("node %s still there after the second removal", victim)
	}
	announced := 0
	for _, e := range f.events.For(victim) {
		if e.Reason == disruption.ReasonRemoved {
			announced++
		}
	}
	if removed != 1 || announced != 1 {
		t.Errorf("removal counted %d times and announced %d times, want once each", removed, announced)
	}
}

// refusingDelete refuses removals: while the provider waits on something
// of its own (a Cluster API MachineSet still making a Machine its
// replicas ask for), or for good (another Machine carries a delete mark
// berth did not set).
type refusingDelete struct {
	cloudprovider.CloudProvider
	mu      sync.Mutex
	asked   int
	waiting bool
}

func (c *refusingDelete) Delete(context.Context, string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked++
	if c.waiting {
		return &cloudprovider.RemovalWaitingError{Message: "waiting for Cluster API: 3 replicas but 2 live Machines"}
	}
	return errors.New("machine default/m-1 carries cluster.x-k8s.io/delete-machine not set by berth")
}

// TestAnEmptiedNodeWaitsForItsProviderPastTheDrainTimeout: the group's one
// empty node is drained; its provider cannot remove it yet. Past the drain
// timeout it stays draining (its pods are gone; giving up would only start
// over), and the provider is asked each round, across a restart (the wait
// is recorded on the node); past the max provision
// time after it emptied, the drain is given up. A provider that refuses
// for good (not waiting) has the drain given up at the drain timeout.
func TestAnEmptiedNodeWaitsForItsProviderPastTheDrainTimeout(t *testing.T) {
	refused := setup(t, "sd-refused-delete", 1)
	refused.ctrl.Cloud = &refusingDelete{CloudProvider: refused.ctrl.Cloud}
	for range 3 {
		_, _ = refused.ctrl.RunOnce(context.Background())
	}
	if !hasEventOn(refused, refused.nodes[0], disruption.ReasonRemovalRefused) {
		t.Errorf("no %s warning on %s naming the provider's refusal: %+v", disruption.ReasonRemovalRefused, refused.nodes[0], refused.events.For(refused.nodes[0]))
	}
	refused.clk.Step(6 * time.Minute)
	if res, _ := refused.ctrl.RunOnce(context.Background()); !contains(res.GivenUp, refused.nodes[0]) {
		t.Errorf("a removal refused for good: gave up %v past the drain timeout, want %s", res.GivenUp, refused.nodes[0])
	}

	f := setup(t, "sd-wait-delete", 1)
	cloud := &refusingDelete{CloudProvider: f.ctrl.Cloud, waiting: true}
	f.ctrl.Cloud = cloud
	round := func() *disruption.Result {
		res, _ := f.ctrl.RunOnce(context.Background()) // the refusal is the round's error
		return res
	}
	for range 3 {
		round()
	}
	victim := f.nodes[0]
	if cloud.asked == 0 {
		t.Fatalf("the provider was never asked to remove %s", victim)
	}
	if n := f.node(victim); n == nil || n.Annotations[v1alpha1.AnnotationRemovalWaiting] == "" {
		t.Fatalf("node %s: want it annotated %s once its provider said it waits", victim, v1alpha1.AnnotationRemovalWaiting)
	}
	// A new leader, past the 5-minute drain timeout: the wait is read
	// from the node.
	f.clk.Step(6 * time.Minute)
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	if res := round(); len(res.GivenUp) != 0 {
		t.Fatalf("gave up %v past the drain timeout after a restart, want the emptied node to wait for its provider", res.GivenUp)
	}
	if n := f.node(victim); n == nil || !tainted(n) {
		t.Fatalf("node %s: want it still draining", victim)
	}
	f.clk.Step(disruption.DefaultMaxProvisionTime)
	if res := round(); !contains(res.GivenUp, victim) {
		t.Errorf("gave up %v past the max provision time, want %s", res.GivenUp, victim)
	}
	if n := f.node(victim); n == nil || tainted(n) || n.Annotations[v1alpha1.AnnotationRemovalWaiting] != "" {
		t.Errorf("node %s after the drain was given up: want it untainted and without %s", victim, v1alpha1.AnnotationRemovalWaiting)
	}
}

// TestAnAcceptedRemovalSurvivesARestart: the provider accepts removing
// the group's one empty node but does not act. The node records it
// (berth.dev/removal-accepted); a controller started afresh, past the
// drain timeout, does not give the drain up or count the removal again:
// it asks the provider again. Past the max provision time a warning says
// the node lingers.
func TestAnAcceptedRemovalSurvivesARestart(t *testing.T) {
	f := setup(t, "sd-accepted-restart", 1)
	cloud := &lazyDelete{CloudProvider: f.ctrl.Cloud, asked: map[string]int{}, ignore: 100}
	f.ctrl.Cloud = cloud
	victim := f.nodes[0]
	for range 3 {
		f.run()
	}
	if n := f.node(victim); n == nil || n.Annotations[v1alpha1.AnnotationRemovalAccepted] == "" || cloud.times(victim) != 1 {
		t.Fatalf("node %s after its removal was accepted: want it there, annotated %s, and the provider asked once (asked %d)",
			victim, v1alpha1.AnnotationRemovalAccepted, cloud.times(victim))
	}
	// A new leader, 6 minutes on: past the 5-minute drain timeout.
	f.clk.Step(6 * time.Minute)
	f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: cloud, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
	res := f.run()
	if len(res.GivenUp) != 0 || len(res.Removed) != 0 || cloud.times(victim) != 2 {
		t.Fatalf("after the restart: gave up %v, counted %v, asked %d times; want nothing given up or counted, the provider asked again",
			res.GivenUp, res.Removed, cloud.times(victim))
	}
	if n := f.node(victim); n == nil || !tainted(n) {
		t.Fatalf("node %s after the restart: want it still tainted", victim)
	}
	f.clk.Step(disruption.DefaultMaxProvisionTime)
	f.run()
	if !hasEventOn(f, victim, disruption.ReasonRemovalLingers) {
		t.Errorf("no %s warning on %s past the max provision time: %+v", disruption.ReasonRemovalLingers, victim, f.events.For(victim))
	}
}

// podsAtDelete records how many running pods of namespace a node had
// when its removal was asked.
type podsAtDelete struct {
	cloudprovider.CloudProvider
	ns   string
	mu   sync.Mutex
	pods map[string]int
}

func (c *podsAtDelete) Delete(ctx context.Context, node string) error {
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(c.ns)); err != nil {
		return err
	}
	running := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			running++
		}
	}
	c.mu.Lock()
	c.pods[node] = max(c.pods[node], running)
	c.mu.Unlock()
	return c.CloudProvider.Delete(ctx, node)
}

// TestAnEarlierRemovalsAcceptanceIsNotThisDrains: both nodes carry
// berth.dev/removal-accepted and removal-waiting from an earlier removal
// that was undone (a Cluster API Machine kept, its taint taken off by
// hand). A new drain of one of them evicts its pod before the provider is
// asked to remove it: the old acceptance skipped the evictions, and the
// node went with its pod.
func TestAnEarlierRemovalsAcceptanceIsNotThisDrains(t *testing.T) {
	f := setup(t, "sd-stale-accepted", 2)
	f.deployment(2)
	long := f.clk.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, name := range f.nodes {
		n := f.node(name)
		patch := client.MergeFrom(n.DeepCopy())
		n.Annotations[v1alpha1.AnnotationRemovalAccepted] = long
		n.Annotations[v1alpha1.AnnotationRemovalWaiting] = long
		if err := env.Client.Patch(context.Background(), n, patch); err != nil {
			t.Fatal(err)
		}
	}
	cloud := &podsAtDelete{CloudProvider: f.ctrl.Cloud, ns: f.ns, pods: map[string]int{}}
	f.ctrl.Cloud = cloud
	var victim string
	for range 10 {
		res := f.run()
		if victim == "" && len(res.Started) > 0 {
			victim = res.Started[0]
		}
		if victim != "" && f.node(victim) == nil {
			break
		}
		time.Sleep(time.Second) // the evicted pod's replacement is scheduled
	}
	if victim == "" {
		t.Fatal("no node drained")
	}
	cloud.mu.Lock()
	defer cloud.mu.Unlock()
	if got, asked := cloud.pods[victim]; !asked || got != 0 {
		t.Errorf("node %s: provider asked %v with %d running pods on it, want asked once its pod was evicted", victim, asked, got)
	}
}

// TestATaintBerthDidNotWriteStartsNoDrain: a node of berth's carries
// berth.dev/disrupted without the start berth writes with it (a hand
// edit). No pod is evicted and the node is not removed: the taint is taken
// off with a DrainStopped event. Before, it was drained outside its
// group's budget with no timeout.
func TestATaintBerthDidNotWriteStartsNoDrain(t *testing.T) {
	f := setup(t, "sd-foreign-taint", 2)
	f.deployment(2)
	victim := f.nodes[0]
	n := f.node(victim)
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	if err := env.Client.Patch(context.Background(), n, patch); err != nil {
		t.Fatal(err)
	}
	cloud := &podsAtDelete{CloudProvider: f.ctrl.Cloud, ns: f.ns, pods: map[string]int{}}
	f.ctrl.Cloud = cloud
	res := f.run()
	if !contains(res.GivenUp, victim) {
		t.Fatalf("given up %v, want %s", res.GivenUp, victim)
	}
	if n := f.node(victim); n == nil || tainted(n) {
		t.Fatalf("node %s: want it there and untainted", victim)
	}
	if !hasEventOn(f, victim, disruption.ReasonDrainStopped) {
		t.Errorf("no %s event on %s: %+v", disruption.ReasonDrainStopped, victim, f.events.For(victim))
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s evicted for a taint berth did not write", p.Name)
		}
	}
}
