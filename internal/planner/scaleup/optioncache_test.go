package scaleup_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestOptionsKeptFromRoundToRoundPlanAsBuiltAnew: rounds that keep the
// node groups' options (scaleup.Options, as the provisioner does) plan
// what rounds that build them anew plan, while the groups change as the
// API server changes them (a new generation with every spec change:
// prices, instance types, taints), DaemonSets come, grow and go (a new
// generation with every change), offerings become unavailable and
// available again, and groups come and go. It fails when the cache
// keeps options after a generation, a DaemonSet or the unavailable
// offerings changed.
func TestOptionsKeptFromRoundToRoundPlanAsBuiltAnew(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	cache := scaleup.NewOptions()
	group := func(name string, uid types.UID) *v1alpha1.NodeGroup {
		ng := b.NodeGroup(name, b.InstanceType("small", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.Spot("zone-b", "0.04")),
			b.InstanceType("large", "8", "32Gi", b.OnDemand("zone-a", "0.38"), b.Spot("zone-b", "0.15")))
		ng.UID, ng.Generation = uid, 1
		return ng
	}
	groups := []*v1alpha1.NodeGroup{group("a", "uid-a"), group("b", "uid-b")}
	agent := b.DaemonSet("agent", b.CPU("500m"))
	agent.UID, agent.Generation = "uid-agent", 1
	var dss []*appsv1.DaemonSet
	var unavailable []scaleup.Offering
	var pods []*corev1.Pod
	for i := range 8 {
		pods = append(pods, b.Pod(fmt.Sprintf("p-%d", i), b.CPU("1500m"), b.Memory("3Gi")))
	}
	for round := range 60 {
		switch rng.IntN(6) {
		case 0: // a price changes: a new generation
			ng := groups[rng.IntN(len(groups))].DeepCopy()
			ng.Spec.InstanceTypes[rng.IntN(len(ng.Spec.InstanceTypes))].Offerings[rng.IntN(2)].PricePerHour = fmt.Sprintf("0.%02d", 1+rng.IntN(60))
			ng.Generation++
			groups = replace(groups, ng)
		case 1: // the DaemonSet comes, grows or goes
			switch {
			case dss == nil:
				dss = []*appsv1.DaemonSet{agent}
			case rng.IntN(2) == 0:
				grown := dss[0].DeepCopy()
				grown.Spec.Template.Spec.Containers[0].Resources.Requests = b.DaemonSet("x", b.CPU(fmt.Sprintf("%dm", 100*(1+rng.IntN(15))))).Spec.Template.Spec.Containers[0].Resources.Requests
				grown.Generation++
				dss = []*appsv1.DaemonSet{grown}
			default:
				dss = nil
			}
		case 2: // an offering fails, or comes back
			if len(unavailable) > 0 && rng.IntN(2) == 0 {
				unavailable = nil
			} else {
				unavailable = append(unavailable, scaleup.Offering{NodeGroup: groups[rng.IntN(len(groups))].Name, InstanceType: "large",
					Zone: []string{"zone-a", "zone-b"}[rng.IntN(2)], CapacityType: []string{"on-demand", "spot"}[rng.IntN(2)]})
			}
		case 3: // a group goes, or comes back as a new object
			if len(groups) == 2 {
				groups = groups[:1]
			} else {
				groups = append(groups, group("b", types.UID(fmt.Sprintf("uid-b-%d", round))))
			}
		case 4: // an instance type goes: a new generation
			ng := groups[0].DeepCopy()
			if len(ng.Spec.InstanceTypes) > 1 {
				ng.Spec.InstanceTypes = ng.Spec.InstanceTypes[1:]
				ng.Generation++
				groups[0] = ng
			}
		}
		in := scaleup.Input{NodeGroups: groups, Pending: pods, DaemonSets: dss, Unavailable: unavailable}
		fresh, err := scaleup.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		in.Options = cache
		kept, err := scaleup.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(summary(fresh), summary(kept)); d != "" {
			t.Fatalf("round %d: the plan with the options kept differs from the one built anew (-anew +kept):\n%s", round, d)
		}
	}
}

// replace returns groups with the one of ng's name replaced by ng.
func replace(groups []*v1alpha1.NodeGroup, ng *v1alpha1.NodeGroup) []*v1alpha1.NodeGroup {
	for i, g := range groups {
		if g.Name == ng.Name {
			groups[i] = ng
		}
	}
	return groups
}
