package disruption_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestAReplacementThatFailsToLaunchIsPlannedOnAnotherOffering: as in
// TestReplaceByACheaperNodeFirst, one 8-cpu node replaces the three 2-cpu
// nodes (0.30/h), and it is cheapest on demand (0.20/h), but the cloud has
// no on-demand capacity for it (KWOK's failure injection). The failed
// offering is avoided, the node group says so in a Warning event, and the
// next round launches the replacement on spot (0.25/h), the next cheapest,
// instead of failing on the same offering round after round.
func TestAReplacementThatFailsToLaunchIsPlannedOnAnotherOffering(t *testing.T) {
	f := setup(t, "sd-replace-ice", 3)
	offerings := state.NewOfferings(f.clk, time.Hour)
	f.ctrl.Offerings = offerings
	f.deploymentOf(3, "1200m")
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"), b.Spot("zone-a", "0.25"))(g)
		g.Spec.Provider.KWOK.FailOfferings = []v1alpha1.OfferingSelector{{InstanceType: "l-8", CapacityType: v1alpha1.CapacityTypeOnDemand}}
	})
	var repl string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		if res := f.run(); len(res.Replacements) == 1 {
			repl = res.Replacements[0]
		}
		return repl != "", "no replacement launched", nil
	})
	if n := f.node(repl); n == nil || n.Labels[v1alpha1.LabelInstanceType] != "l-8" || n.Labels[v1alpha1.LabelCapacityType] != string(v1alpha1.CapacityTypeSpot) {
		t.Errorf("replacement %s: %v, want l-8 on spot", repl, n)
	}
	failed := 0
	for _, e := range f.events.For(f.group.Name) {
		if e.Reason == disruption.ReasonReplacementLaunchFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d %s events on the node group, want 1 (the on-demand offering tried once)", failed, disruption.ReasonReplacementLaunchFailed)
	}
	want := v1alpha1.OfferingKey{NodeGroup: f.group.Name, InstanceType: "l-8", Zone: "zone-a", CapacityType: string(v1alpha1.CapacityTypeOnDemand)}
	if u := offerings.Unavailable(); len(u) != 1 || u[0] != want {
		t.Errorf("unavailable offerings %v, want %v", u, want)
	}
}

// TestALifecycleReplacementThatFailsToLaunchIsPlannedOnAnotherOffering:
// an expired node's replacement would be its own type (m-2, 0.10/h),
// which the cloud cannot launch; the next round launches an m-3 (0.20/h)
// and the node is replaced.
func TestALifecycleReplacementThatFailsToLaunchIsPlannedOnAnotherOffering(t *testing.T) {
	f := setup(t, "life-expire-ice", 1, b.InstanceType("m-3", "3", "8Gi", b.OnDemand("zone-a", "0.20")))
	offerings := state.NewOfferings(f.clk, time.Hour)
	f.ctrl.Offerings = offerings
	f.deployment(1)
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Hour}
		g.Spec.Provider.KWOK.FailOfferings = []v1alpha1.OfferingSelector{{InstanceType: "m-2"}}
	})
	f.clk.Step(90 * time.Minute)
	var repl string
	for i := 0; repl == "" && i < 5; i++ {
		res := f.tolerantRun()
		if len(res.Replacements) == 1 {
			repl = res.Replacements[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	if repl == "" {
		t.Fatalf("no replacement launched in five rounds; events %v", f.events.For(f.group.Name))
	}
	if n := f.node(repl); n == nil || n.Labels[v1alpha1.LabelInstanceType] != "m-3" {
		t.Errorf("replacement %s: %v, want m-3", repl, n)
	}
	if got := f.events.For(f.group.Name); len(got) != 1 || got[0].Reason != disruption.ReasonReplacementLaunchFailed {
		t.Errorf("events on the node group %v, want one %s", got, disruption.ReasonReplacementLaunchFailed)
	}
	f.clk.SetTime(time.Now())
	f.removedWithin(f.nodes[0], 2*time.Minute)
	f.waitRunning(1)
}

// atReplicaLimit is a cloud that refuses every launch at the group's
// maxSize, as Cluster API does for a group at its replica limit (it
// cannot add a replacement before the node it replaces goes).
type atReplicaLimit struct{ cloudprovider.CloudProvider }

func (atReplicaLimit) Create(_ context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	return nil, &cloudprovider.MaxSizeError{NodeGroup: req.NodeGroup.Name, MaxSize: req.NodeGroup.Spec.MaxSize}
}

// TestAReplacementRefusedAtMaxSizeSaysSoAndAvoidsNothing: an expired
// node's replacement is refused at the group's maxSize. No offering is
// blamed (scale-up keeps launching it), and the node group says why the
// node is not replaced.
func TestAReplacementRefusedAtMaxSizeSaysSoAndAvoidsNothing(t *testing.T) {
	f := setup(t, "life-expire-full", 1)
	offerings := state.NewOfferings(f.clk, time.Hour)
	f.ctrl.Offerings = offerings
	f.ctrl.Cloud = atReplicaLimit{kwok.New(env.Client, clock.RealClock{})}
	f.deployment(1)
	f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Hour} })
	f.clk.Step(90 * time.Minute)
	if res := f.tolerantRun(); len(res.Replacements) != 0 {
		t.Fatalf("launched %v through a provider that refuses every launch", res.Replacements)
	}
	said := false
	for _, e := range f.events.For(f.group.Name) {
		said = said || (e.Reason == disruption.ReasonReplacementLaunchFailed && strings.Contains(e.Message, "wait until the group has room"))
	}
	if !said {
		t.Errorf("events on the node group %v, want a %s saying the nodes wait for room", f.events.For(f.group.Name), disruption.ReasonReplacementLaunchFailed)
	}
	if u := offerings.Unavailable(); len(u) != 0 {
		t.Errorf("unavailable offerings %v after a refusal at maxSize, want none", u)
	}
	if n := f.node(f.nodes[0]); n == nil || tainted(n) {
		t.Errorf("the expired node was tainted or removed without its replacement: %v", n)
	}
}
