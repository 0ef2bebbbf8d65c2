package disruption_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
