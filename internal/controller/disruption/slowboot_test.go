package disruption_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// slowBoot launches instances whose Node does not register (a Cluster API
// Machine booting for minutes): Create makes no Node, and Pending reports
// the instance until the provider stops launching it (gone).
type slowBoot struct {
	cloudprovider.CloudProvider
	mu       sync.Mutex
	launched []*cloudprovider.Instance
	gone     bool
}

func (c *slowBoot) Create(_ context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst := &cloudprovider.Instance{NodeName: fmt.Sprintf("%s-booting-%d", req.NodeGroup.Name, len(c.launched)), NodeGroup: req.NodeGroup.Name,
		Offering: req.Offering, CreatedAt: time.Now()}
	c.launched = append(c.launched, inst)
	return inst, nil
}

func (c *slowBoot) Pending(_ context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*cloudprovider.Instance
	for _, inst := range c.launched {
		if !c.gone && inst.NodeGroup == ng.Name {
			out = append(out, inst)
		}
	}
	return out, nil
}

// TestAReplacementStillBootingIsAwaited: a cheaper node replaces three
// (as in TestReplaceByACheaperNodeFirst), but its Node takes longer to
// register than the two minutes after which a missing replacement is
// given up. While the provider still launches it, the old nodes stay
// marked and no other replacement is launched; once the provider no
// longer launches it, the replacement is given up and the nodes stay.
func TestAReplacementStillBootingIsAwaited(t *testing.T) {
	f, cloud, repl := slowReplacement(t, "sd-replace-slow")
	for range 2 {
		f.clk.Step(5 * time.Minute)
		if res := f.run(); len(res.Replacements) != 0 || len(res.GivenUp) != 0 {
			t.Fatalf("while %s boots: launched %v, gave up %v", repl, res.Replacements, res.GivenUp)
		}
		if got := f.markedBy(repl); got != 3 {
			t.Fatalf("%d of the 3 old nodes marked replaced by %s while it boots, want 3", got, repl)
		}
	}
	cloud.mu.Lock()
	cloud.gone = true
	cloud.mu.Unlock()
	if res := f.run(); len(res.GivenUp) != 3 {
		t.Errorf("gave up %v once the provider stopped launching %s, want the 3 old nodes", res.GivenUp, repl)
	}
	if got := f.markedBy(repl); got != 0 {
		t.Errorf("%d old nodes still marked after the replacement was given up", got)
	}
	gone := false
	for _, old := range f.nodes {
		for _, e := range f.events.For(old) {
			gone = gone || (e.Reason == disruption.ReasonDrainStopped && strings.Contains(e.Message, repl+" is gone"))
		}
	}
	if !gone {
		t.Errorf("no event says the replacement %s is gone", repl)
	}
}

// TestAReplacementBootingPastTheMaxProvisionTimeIsGivenUp: the provider
// still launches the replacement 16 minutes later, past the max provision
// time (15 minutes by default): it is given up and the nodes stay.
func TestAReplacementBootingPastTheMaxProvisionTimeIsGivenUp(t *testing.T) {
	f, _, repl := slowReplacement(t, "sd-replace-slower")
	f.clk.Step(10 * time.Minute)
	if res := f.run(); len(res.GivenUp) != 0 || f.markedBy(repl) != 3 {
		t.Fatalf("10 minutes after the launch: gave up %v, %d nodes marked; want none given up, 3 marked", res.GivenUp, f.markedBy(repl))
	}
	f.clk.Step(6 * time.Minute)
	if res := f.run(); len(res.GivenUp) != 3 || f.markedBy(repl) != 0 {
		t.Errorf("16 minutes after the launch: gave up %v, %d nodes still marked; want the 3 old nodes given up", res.GivenUp, f.markedBy(repl))
	}
}

// slowReplacement launches, through a slowBoot cloud, one cheaper node
// to replace the fixture's three (as TestReplaceByACheaperNodeFirst), and
// returns its name.
func slowReplacement(t *testing.T, name string) (*fixture, *slowBoot, string) {
	t.Helper()
	f := setup(t, name, 3)
	cloud := &slowBoot{CloudProvider: kwok.New(env.Client, clock.RealClock{})}
	f.ctrl.Cloud = cloud
	f.deploymentOf(3, "1200m")
	f.updateGroup(func(g *v1alpha1.NodeGroup) { b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g) })
	var repl string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		if res := f.run(); len(res.Replacements) == 1 {
			repl = res.Replacements[0]
		}
		return repl != "", "no replacement launched", nil
	})
	return f, cloud, repl
}

// markedBy counts the fixture's nodes marked replaced by repl.
func (f *fixture) markedBy(repl string) int {
	n := 0
	for _, old := range f.nodes {
		if node := f.node(old); node != nil && node.Annotations[v1alpha1.AnnotationReplacedBy] == repl {
			n++
		}
	}
	return n
}

// TestAnInterruptionDoesNotWaitForAReplacementStillBooting: three nodes
// wait for a replacement that takes minutes to boot; one of them gets an
// interruption notice (spot) with two minutes left. Its drain starts in
// that round (the cloud takes it at the deadline whether or not the
// replacement is Ready), its offering is avoided, and the two others keep
// waiting.
func TestAnInterruptionDoesNotWaitForAReplacementStillBooting(t *testing.T) {
	f, _, repl := slowReplacement(t, "sd-replace-interrupted")
	offerings := state.NewOfferings(f.clk, time.Hour)
	f.ctrl.Offerings = offerings
	victim := f.nodes[0]
	f.patchNode(victim, func(n *corev1.Node) {
		n.Labels[v1alpha1.LabelCapacityType] = string(v1alpha1.CapacityTypeSpot)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Effect: corev1.TaintEffectNoSchedule})
		n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = f.clk.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)
	})
	res := f.run()
	if len(res.Started) != 1 || res.Started[0] != victim {
		t.Fatalf("started %v in the round after the notice, want [%s] while %s boots", res.Started, victim, repl)
	}
	if n := f.node(victim); n == nil || !tainted(n) || n.Annotations[v1alpha1.AnnotationDisruptionReason] != string(v1alpha1.ReasonInterrupted) {
		t.Errorf("node %s: want it tainted %s and draining for the interruption", victim, v1alpha1.TaintDisrupted)
	}
	if u := offerings.Unavailable(); len(u) != 1 || u[0].InstanceType != "m-2" || u[0].CapacityType != string(v1alpha1.CapacityTypeSpot) {
		t.Errorf("unavailable offerings %v, want the interrupted node's m-2 spot", u)
	}
	if got := f.markedBy(repl); got != 3 {
		t.Errorf("%d nodes still marked replaced by %s, want all 3 (the interrupted one drains with its mark)", got, repl)
	}
	for _, other := range f.nodes[1:] {
		if n := f.node(other); n == nil || tainted(n) {
			t.Errorf("node %s tainted: only the interrupted node drains before %s is Ready", other, repl)
		}
	}
}
