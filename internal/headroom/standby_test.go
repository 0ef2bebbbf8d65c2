package headroom_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTargetSplitsUnitsIntoRunningAndStandby: with spec.standby, a known
// target keeps running the units the first part of a burst needs (the
// burst window's estimate) and the rest of the launch window's on
// standby nodes; all of them standby when a resume is within the wait;
// all running while the burst window is not known; the count by hand
// while learning; none without standby.
func TestTargetSplitsUnitsIntoRunningAndStandby(t *testing.T) {
	in := cluster()
	in.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("general", b.InstanceType("c4", "4", "16Gi", b.OnDemand("zone-a", "0.40")))}
	known := func(n int64) demand.Estimate { return demand.Estimate{Units: n, Known: true} }
	burst := func(n int64) *demand.Estimate { e := known(n); return &e }
	spec := func(standby *v1alpha1.StandbyHeadroom) v1alpha1.HeadroomSpec {
		return v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Units: units(2, "1", "1Gi"), Standby: standby,
			Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}}
	}
	tests := []struct {
		name                  string
		standby               *v1alpha1.StandbyHeadroom
		target                *headroom.TargetInput
		wantRunning, wantWait int32
		wantCost              string
		wantSays              string
	}{
		{name: "the burst window's 3 units run and the other 7 of 10 are standby",
			standby: &v1alpha1.StandbyHeadroom{Count: 1},
			target:  &headroom.TargetInput{BurstKnown: true, Estimate: known(10), Window: 90 * time.Second, Burst: burst(3), BurstWindow: 30 * time.Second},
			// 3 x 0.10 running + 7 x 0.01 stopped (a tenth of the price)
			wantRunning: 3, wantWait: 7, wantCost: "0.3700", wantSays: "the first 30s of a burst fits in 3: 3 running, 7 standby"},
		{name: "a resume within the wait makes every unit standby",
			standby:     &v1alpha1.StandbyHeadroom{Count: 1},
			target:      &headroom.TargetInput{BurstKnown: true, Estimate: known(10), Window: 90 * time.Second, BurstWindow: 0},
			wantRunning: 0, wantWait: 10, wantCost: "0.1000", wantSays: "Ready within the wait"},
		{name: "a burst window bigger than the launch window's keeps them all running",
			standby:     &v1alpha1.StandbyHeadroom{Count: 1},
			target:      &headroom.TargetInput{Estimate: known(10), Window: 90 * time.Second, Burst: burst(12), BurstWindow: 30 * time.Second},
			wantRunning: 10, wantWait: 0, wantCost: "1.0000"},
		{name: "an unknown burst window keeps them all running",
			standby:     &v1alpha1.StandbyHeadroom{Count: 1},
			target:      &headroom.TargetInput{Estimate: known(10), Window: 90 * time.Second, Burst: &demand.Estimate{}, BurstWindow: 30 * time.Second},
			wantRunning: 10, wantWait: 0, wantSays: "all running until"},
		{name: "while learning, the counts by hand",
			standby:     &v1alpha1.StandbyHeadroom{Count: 6},
			target:      &headroom.TargetInput{Window: 90 * time.Second, Burst: burst(3), BurstWindow: 30 * time.Second},
			wantRunning: 2, wantWait: 6},
		{name: "without spec.standby every unit runs",
			target:      &headroom.TargetInput{BurstKnown: true, Estimate: known(10), Window: 90 * time.Second, Burst: burst(3), BurstWindow: 30 * time.Second},
			wantRunning: 10, wantWait: 0, wantCost: "1.0000"},
		{name: "before the learner worked out the burst window every unit runs",
			standby:     &v1alpha1.StandbyHeadroom{Count: 1},
			target:      &headroom.TargetInput{Estimate: known(10), Window: 90 * time.Second},
			wantRunning: 10, wantWait: 0, wantSays: "until the resume time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hr(spec(tt.standby))
			in.Targets = map[string]headroom.TargetInput{h.Name: *tt.target}
			got, err := headroom.Resolve(h, in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != tt.wantRunning || got.Standby != tt.wantWait {
				t.Errorf("%d running and %d standby units, want %d and %d (%s)", got.Count, got.Standby, tt.wantRunning, tt.wantWait, got.Target.Message)
			}
			if st := got.Target.Status(time.Minute); tt.wantCost != "" && st.CostPerHour != tt.wantCost {
				t.Errorf("cost %s an hour, want %s", st.CostPerHour, tt.wantCost)
			}
			if !strings.Contains(got.Target.Message, tt.wantSays) {
				t.Errorf("message %q does not say %q", got.Target.Message, tt.wantSays)
			}
		})
	}
}

// TestBurstWindow: running units hold the part of a burst before a
// resumed node is Ready (its resume plus berth's reaction) less the wait.
func TestBurstWindow(t *testing.T) {
	for _, tt := range []struct{ resume, wait, want time.Duration }{
		{30 * time.Second, 5 * time.Second, 30 * time.Second},
		{20 * time.Second, 25 * time.Second, 0},
		{0, 0, headroom.Reaction},
	} {
		if got := headroom.BurstWindow(tt.resume, tt.wait); got != tt.want {
			t.Errorf("BurstWindow(%s, %s) = %s, want %s", tt.resume, tt.wait, got, tt.want)
		}
	}
}

// TestResumeWindowIsMeasuredOnResumedNodes: the resume time is the median
// of resumed nodes' resume to Ready; without one, the group's KWOK
// resumeDelay, else a third of the launch. A resumed node does not count
// as a launch in LaunchWindow.
func TestResumeWindowIsMeasuredOnResumedNodes(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	node := func(name string, created, resumed time.Time, ready time.Duration) *corev1.Node {
		n := b.Node(name, "2", "8Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "g"), b.NodeAnnotation(v1alpha1.AnnotationLaunchedBy, "uid"))
		n.CreationTimestamp = metav1.NewTime(created)
		from := created
		if !resumed.IsZero() {
			n.Annotations[v1alpha1.AnnotationResumedAt] = resumed.Format(time.RFC3339)
			from = resumed
		}
		n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(from.Add(ready))
		return n
	}
	g := b.NodeGroup("g", b.LaunchDelay(metav1.Duration{Duration: 90 * time.Second}))
	nodes := []*corev1.Node{
		node("launched", at, time.Time{}, 80*time.Second),
		node("r1", at.Add(-time.Hour), at, 20*time.Second),
		node("r2", at.Add(-time.Hour), at, 25*time.Second),
		node("r3", at.Add(-time.Hour), at, 40*time.Second),
	}
	groups := []*v1alpha1.NodeGroup{g}
	if got, measured := headroom.ResumeWindow(groups, nodes, time.Minute); got != 25*time.Second || !measured {
		t.Errorf("resume window %s, want the median 25s", got)
	}
	if got, measured := headroom.LaunchWindow(groups, nodes); got != 80*time.Second || !measured {
		t.Errorf("launch window %s (measured %v), want 80s from the launched node only", got, measured)
	}
	if got, _ := headroom.ResumeWindow(groups, nodes[:1], 90*time.Second); got != 30*time.Second {
		t.Errorf("resume window without a resumed node %s, want a third of the launch delay", got)
	}
	g.Spec.Provider.KWOK.ResumeDelay = &metav1.Duration{Duration: 12 * time.Second}
	if got, _ := headroom.ResumeWindow(groups, nodes[:1], 90*time.Second); got != 12*time.Second {
		t.Errorf("resume window without a resumed node %s, want the group's resumeDelay", got)
	}
}

// TestFollowBurstWindowChangesRarely: the burst window a learner counts
// in stays while nothing is measured or the measure moves by up to 5 s;
// a first window, or a larger move, is taken.
func TestFollowBurstWindowChangesRarely(t *testing.T) {
	for _, tt := range []struct {
		have, want time.Duration
		measured   bool
		keep       time.Duration
	}{
		{0, 15 * time.Second, false, 15 * time.Second},
		{10 * time.Second, 15 * time.Second, true, 10 * time.Second},
		{10 * time.Second, 40 * time.Second, false, 10 * time.Second},
		{10 * time.Second, 40 * time.Second, true, 40 * time.Second},
		{10 * time.Second, 0, true, 0},
	} {
		if got := headroom.FollowBurstWindow(tt.have, tt.want, tt.measured); got != tt.keep {
			t.Errorf("FollowBurstWindow(%s, %s, measured %v) = %s, want %s", tt.have, tt.want, tt.measured, got, tt.keep)
		}
	}
}

// TestStandbyUnitsLeaveRoomForDaemonSets: a standby node holds the units
// that fit beside the DaemonSets that run on it once resumed (the standby
// taint gone), whether or not they tolerate it; the cheapest offering per
// unit is chosen with that room taken; and the planner's copy of a
// suspended node keeps room for the DaemonSets that start only after the
// resume (those already on it are bound pods).
func TestStandbyUnitsLeaveRoomForDaemonSets(t *testing.T) {
	shape := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	agent := b.DaemonSet("agent", b.Namespace("kube-system"), b.CPU("500m"))                                    // does not tolerate standby
	cni := b.DaemonSet("cni", b.Namespace("kube-system"), b.CPU("250m"), b.Tolerate("", "", ""))                // tolerates every taint
	gpuOnly := b.DaemonSet("gpu", b.Namespace("kube-system"), b.CPU("1"), b.NodeSelector("accelerator", "gpu")) // runs elsewhere
	dss := daemonset.Pods([]*appsv1.DaemonSet{agent, cni, gpuOnly})
	node := b.Node("standby-1", "4", "16Gi", b.NodeTaint(v1alpha1.TaintStandby, "true", corev1.TaintEffectNoSchedule),
		b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule))
	if got := headroom.NodeUnits(node, nil, shape); got != 4 {
		t.Errorf("units on a 4-cpu node without DaemonSets: %d, want 4", got)
	}
	if got := headroom.NodeUnits(node, dss, shape); got != 3 {
		t.Errorf("units on a 4-cpu node beside 750m of DaemonSets: %d, want 3", got)
	}
	copyOf := headroom.Resumable(node, dss)
	if cpu := copyOf.Status.Allocatable[corev1.ResourceCPU]; cpu.MilliValue() != 3500 {
		t.Errorf("the planner's copy has %s cpu allocatable, want 3500m: 4 less the agent's 500m that starts after the resume (cni's pod runs already)", cpu.String())
	}
	if cpu := node.Status.Allocatable[corev1.ResourceCPU]; cpu.MilliValue() != 4000 {
		t.Errorf("Resumable changed the node it copies: %s cpu", cpu.String())
	}

	ng := b.NodeGroup("g", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.22")))
	c, ok := headroom.CheapestPerUnit([]*v1alpha1.NodeGroup{ng}, shape, nil, nil, nil)
	if !ok || c.Key.InstanceType != "m-2" || c.PerNode != 2 {
		t.Errorf("without DaemonSets: %+v, want m-2 with 2 units (0.05 a unit against 0.055)", c)
	}
	c, ok = headroom.CheapestPerUnit([]*v1alpha1.NodeGroup{ng}, shape, dss, nil, nil)
	if !ok || c.Key.InstanceType != "m-4" || c.PerNode != 3 {
		t.Errorf("beside 750m of DaemonSets: %+v, want m-4 with 3 units (0.073 a unit against m-2's 1 unit at 0.10)", c)
	}
}

// TestTargetCostLeavesRoomForDaemonSets: a target prices a unit by the
// units a node holds beside the DaemonSet pods that run on it: a c4 node
// (4 cpu, 0.40/h) beside a 1-cpu agent holds 3 units of 1 cpu, so 10
// running units cost 10 x 0.40 / 3 = 1.3333/h (not 1.0000), and a
// maxCostPerHour of 1.00 keeps 7 of them.
func TestTargetCostLeavesRoomForDaemonSets(t *testing.T) {
	in := cluster()
	in.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("general", b.InstanceType("c4", "4", "16Gi", b.OnDemand("zone-a", "0.40")))}
	in.DaemonSets = daemonset.Pods([]*appsv1.DaemonSet{b.DaemonSet("agent", b.Namespace("kube-system"), b.CPU("1"))})
	spec := v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Units: units(2, "1", "1Gi"),
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}}
	h := hr(spec)
	in.Targets = map[string]headroom.TargetInput{h.Name: {Estimate: demand.Estimate{Units: 10, Known: true}, Window: 90 * time.Second}}
	got, err := headroom.Resolve(h, in)
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Target.Status(time.Minute); got.Count != 10 || st.CostPerHour != "1.3333" {
		t.Errorf("%d units at %s an hour, want 10 at 1.3333 (3 units a node beside the agent)", got.Count, st.CostPerHour)
	}
	h.Spec.Target.MaxCostPerHour = "1.00"
	if got, err = headroom.Resolve(h, in); err != nil {
		t.Fatal(err)
	}
	if got.Count != 7 {
		t.Errorf("%d units under maxCostPerHour 1.00, want 7 (at 0.1333 a unit)", got.Count)
	}
}

// TestTargetSaysWhenAPodNeedsSeveralUnitsOnOneNode: a pod of 4 units
// arrived in the last day: the message says it needs them on one node;
// pods of one unit say nothing of it.
func TestTargetSaysWhenAPodNeedsSeveralUnitsOnOneNode(t *testing.T) {
	in := cluster()
	in.NodeGroups = []*v1alpha1.NodeGroup{b.NodeGroup("general", b.InstanceType("c4", "4", "16Gi", b.OnDemand("zone-a", "0.40")))}
	h := hr(v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Units: units(2, "1", "1Gi"),
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}})
	for largest, want := range map[int64]bool{4: true, 1: false, 0: false} {
		in.Targets = map[string]headroom.TargetInput{h.Name: {Estimate: demand.Estimate{Units: 10, Known: true}, Window: 90 * time.Second, LargestPod: largest}}
		got, err := headroom.Resolve(h, in)
		if err != nil {
			t.Fatal(err)
		}
		if says := strings.Contains(got.Target.Message, "needs 4 units on one node"); says != want || got.Count != 10 {
			t.Errorf("largest pod %d units: %d units, message %q; want 10 units and the hint %v", largest, got.Count, got.Target.Message, want)
		}
	}
}
