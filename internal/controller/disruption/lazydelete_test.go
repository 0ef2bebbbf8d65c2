package disruption_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/disruption"
)

// lazyDelete accepts the first removal of each node and does nothing (a
// Cluster API MachineSet that matched the lowered replicas with another
// Machine); later removals are done.
type lazyDelete struct {
	cloudprovider.CloudProvider
	mu    sync.Mutex
	asked map[string]int
}

func (c *lazyDelete) Delete(ctx context.Context, node string) error {
	c.mu.Lock()
	c.asked[node]++
	first := c.asked[node] == 1
	c.mu.Unlock()
	if first {
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
// empty node
// is drained and its removal accepted, but the node stays. It is not asked
// again every round; after DeleteRetryInterval it is, the node goes, and
// the removal is counted and announced once.
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
	f.clk.Step(disruption.DeleteRetryInterval + time.Second)
	removed += len(f.run().Removed)
	if got := cloud.times(victim); got != 2 {
		t.Fatalf("asked the provider %d times after %s, want 2", got, disruption.DeleteRetryInterval)
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
