package headroom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/headroom/demand"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTargetKeepsUnitsOfTheLearnedShapes: the unit's history asks for 10
// units of 1 cpu, 2Gi for all the pods together; the pods of 2 cpu, 4Gi
// need 3 units of their shape whole. On c4 nodes (4 cpu, 16Gi, 0.40/h)
// a unit costs 0.10/h and a unit of 2 cpu, 4Gi 0.20/h; each takes the
// place of the two units of 1 cpu, 2Gi its pod was counted as.
func TestTargetKeepsUnitsOfTheLearnedShapes(t *testing.T) {
	in := cluster()
	in.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("general", b.InstanceType("c4", "4", "16Gi", b.OnDemand("zone-a", "0.40")))}
	known := func(n int64) demand.Estimate { return demand.Estimate{Units: n, Known: true} }
	large := func(cpu, mem string, e demand.Estimate) demand.ShapeEstimate {
		return demand.ShapeEstimate{Shape: demand.ShapeOf(rl(cpu, mem)), Estimate: e}
	}
	tests := []struct {
		name        string
		target      v1alpha1.HeadroomTarget
		standby     *v1alpha1.StandbyHeadroom
		input       headroom.TargetInput
		wantCount   int32
		wantStandby int32
		wantLearned []v1alpha1.LearnedUnits
		wantCost    string
		wantPhase   string
		wantSays    string
	}{
		{name: "three units of the large pods' shape take the place of six of the unit's",
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(3))}},
			wantCount: 4, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 3}},
			wantCost: "1.0000", wantPhase: v1alpha1.TargetSized,
			wantSays: "95 % of the demand of pods of 2 cpu, 4Gi fits in 3 units of that shape: keeping 3; 4 running units of 1 cpu, 2Gi beside them"},
		{name: "one unit of the large pods' shape is said in the singular",
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(1))}},
			wantCount: 8, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 1}},
			wantCost: "1.0000", wantPhase: v1alpha1.TargetSized,
			wantSays: "pods of 2 cpu, 4Gi fits in 1 unit of that shape: keeping 1; 8 running units"},
		{name: "learned units take no more room than the running units: 2 of the 3 the shape needs in 4",
			input:     headroom.TargetInput{Estimate: known(4), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(3))}},
			wantCount: 0, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 2}}, wantCost: "0.4000", wantPhase: v1alpha1.TargetSized,
			wantSays: "fits in 3 units of that shape: keeping 2 (each in the place of 2 running units of 1 cpu, 2Gi, 4 left); 0 running units"},
		{name: "maxUnits bounds the running units the learned ones take the place of",
			target:    v1alpha1.HeadroomTarget{MaxUnits: ptr.To[int32](5)},
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(3))}},
			wantCount: 1, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 2}}, wantCost: "0.5000",
			wantPhase: v1alpha1.TargetCapped, wantSays: "(capped by maxUnits 5)"},
		{name: "maxCostPerHour bounds them too",
			target:    v1alpha1.HeadroomTarget{MaxCostPerHour: "0.50"},
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(3))}},
			wantCount: 1, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 2}}, wantCost: "0.5000", wantPhase: v1alpha1.TargetCapped},
		{name: "a maxCostPerHour of more units than an int32 counts caps nothing",
			target:    v1alpha1.HeadroomTarget{MaxCostPerHour: "1000000000000"},
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(3))}},
			wantCount: 4, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 3}},
			wantCost: "1.0000", wantPhase: v1alpha1.TargetSized},
		{name: "maxCostPerHour cuts learned units that cost more than the units they replace",
			target: v1alpha1.HeadroomTarget{MaxCostPerHour: "1.10"},
			// 3 cpu, 1Gi: one a c4 node (0.40), in the place of 3 units (0.30)
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("3", "1Gi", known(2))}},
			wantCount: 7, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("3", "1Gi"), Count: 1}}, wantCost: "1.1000", wantPhase: v1alpha1.TargetCapped,
			wantSays: "keeping 1 (capped by maxCostPerHour 1.10 at 0.4000 a unit of that shape)"},
		{name: "a shape still learning keeps nothing and says why",
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", demand.Estimate{Why: "learning: 1 bursts seen"})}},
			wantCount: 10, wantCost: "1.0000", wantPhase: v1alpha1.TargetSized, wantSays: "pods of 2 cpu, 4Gi: learning: 1 bursts seen"},
		{name: "a shape no offering in scope holds keeps nothing",
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("8", "4Gi", known(3))}},
			wantCount: 10, wantPhase: v1alpha1.TargetSized, wantSays: "pods of 8 cpu, 4Gi: no offering in scope holds one"},
		{name: "a shape of another cpu to memory ratio takes the place of the units its cpu was counted as",
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("3", "1Gi", known(2))}},
			wantCount: 4, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("3", "1Gi"), Count: 2}}, wantCost: "1.2000", wantPhase: v1alpha1.TargetSized},
		{name: "with shapes Unit nothing is learned apart",
			target:    v1alpha1.HeadroomTarget{Shapes: v1alpha1.TargetShapesUnit},
			input:     headroom.TargetInput{Estimate: known(10), Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(3))}},
			wantCount: 10, wantCost: "1.0000", wantPhase: v1alpha1.TargetSized},
		{name: "standby units stay; the learned ones take the place of running ones",
			standby: &v1alpha1.StandbyHeadroom{},
			input: headroom.TargetInput{Estimate: known(10), BurstKnown: true, Burst: &demand.Estimate{Units: 4, Known: true}, BurstWindow: 30 * time.Second,
				Shapes: []demand.ShapeEstimate{large("2", "4Gi", known(1))}},
			wantCount: 2, wantStandby: 6, wantLearned: []v1alpha1.LearnedUnits{{Resources: rl("2", "4Gi"), Count: 1}},
			// 2 x 0.10 + 1 x 0.20 running, 6 x 0.01 stopped
			wantCost: "0.4600", wantPhase: v1alpha1.TargetSized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := tt.target
			target.Wait, target.Percent = metav1.Duration{Duration: 5 * time.Second}, 95
			h := hr(v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Units: units(2, "1", "2Gi"),
				Standby: tt.standby, Target: &target})
			input := tt.input
			input.Window = 90 * time.Second
			in.Targets = map[string]headroom.TargetInput{h.Name: input}
			got, err := headroom.Resolve(h, in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != tt.wantCount || got.Standby != tt.wantStandby {
				t.Errorf("%d units of the Headroom's shape (%d standby), want %d (%d): %s", got.Count, got.Standby, tt.wantCount, tt.wantStandby, got.Target.Message)
			}
			if d := cmp.Diff(tt.wantLearned, got.Learned); d != "" {
				t.Errorf("learned units (-want +got):\n%s", d)
			}
			st := got.Target.Status(time.Minute)
			if tt.wantCost != "" && st.CostPerHour != tt.wantCost {
				t.Errorf("cost %s an hour, want %s", st.CostPerHour, tt.wantCost)
			}
			if st.Phase != tt.wantPhase || !strings.Contains(st.Message, tt.wantSays) {
				t.Errorf("phase %s, message %q; want %s, saying %q", st.Phase, st.Message, tt.wantPhase, tt.wantSays)
			}
			pods := headroom.VirtualPods(h, got)
			if int32(len(pods)) != got.Total() {
				t.Fatalf("%d virtual pods for %d units", len(pods), got.Total())
			}
			for i, l := range got.Learned {
				p := pods[int(got.Count)+i]
				if !cmp.Equal(p.Spec.Containers[0].Resources.Requests, l.Resources) || p.Spec.Affinity == nil {
					t.Errorf("learned unit %s requests %v (affinity %v), want %v in scope", p.Name, p.Spec.Containers[0].Resources.Requests, p.Spec.Affinity, l.Resources)
				}
			}
		})
	}
}

// The virtual pods of a Headroom's units: its own shape's first, then
// the learned shapes', named in one sequence, all in scope.
func TestVirtualPodsOfLearnedShapes(t *testing.T) {
	h := hr(v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}})
	r := headroom.Resolved{Count: 2, Shape: v1alpha1.UnitShape{Resources: rl("1", "1Gi"), NodeSelector: map[string]string{"disk": "ssd"}},
		Groups:  cluster().NodeGroups[:1],
		Learned: []v1alpha1.LearnedUnits{{Resources: rl("4", "8Gi"), Count: 1}, {Resources: rl("2", "16Gi"), Count: 2}}}
	var got []string
	for _, p := range headroom.VirtualPods(h, r) {
		req := p.Spec.Containers[0].Resources.Requests
		got = append(got, p.Name+":"+req.Cpu().String()+"/"+req.Memory().String()+":"+p.Spec.NodeSelector["disk"])
	}
	want := []string{"headroom-h-0:1/1Gi:ssd", "headroom-h-1:1/1Gi:ssd", "headroom-h-2:4/8Gi:ssd", "headroom-h-3:2/16Gi:ssd", "headroom-h-4:2/16Gi:ssd"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("virtual pods (-want +got):\n%s", d)
	}
}

// Offerings priced at 0 (on-premises, KWOK) hold learned units as any
// other; the hint that a pod needs several units on one node is given
// only when no learned unit is kept.
func TestLearnedShapesOnFreeOfferingsAndTheHint(t *testing.T) {
	in := cluster()
	in.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("general", b.InstanceType("c4", "4", "16Gi", b.OnDemand("zone-a", "0")))}
	h := hr(v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Units: units(2, "1", "2Gi"),
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}})
	large := demand.ShapeEstimate{Shape: demand.ShapeOf(rl("2", "4Gi")), Estimate: demand.Estimate{Units: 3, Known: true}}
	for _, tc := range []struct {
		name        string
		shape       demand.ShapeEstimate
		wantLearned int
		wantHint    bool
	}{
		{name: "a known shape keeps units, no hint", shape: large, wantLearned: 1},
		{name: "a shape still learning keeps none: the hint", shape: demand.ShapeEstimate{Shape: large.Shape, Estimate: demand.Estimate{Why: "learning"}}, wantHint: true},
	} {
		in.Targets = map[string]headroom.TargetInput{h.Name: {Estimate: demand.Estimate{Units: 10, Known: true}, Window: 90 * time.Second,
			LargestPod: 2, Shapes: []demand.ShapeEstimate{tc.shape}}}
		got, err := headroom.Resolve(h, in)
		if err != nil {
			t.Fatal(err)
		}
		if hint := strings.Contains(got.Target.Message, "needs 2 units on one node"); len(got.Learned) != tc.wantLearned || hint != tc.wantHint {
			t.Errorf("%s: %d learned shapes, hint %v (%s); want %d, %v", tc.name, len(got.Learned), hint, got.Target.Message, tc.wantLearned, tc.wantHint)
		}
	}
}
