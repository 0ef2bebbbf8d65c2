package headroomtarget

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// learner is a Learner on the real API server with a fake clock; its pod
// events are fed by the test (the informer's handlers call the same
// methods).
func learner(clk *clocktesting.FakeClock) *Learner {
	return &Learner{Client: env.Client, APIReader: env.Client, Targets: state.NewTargets(), Clock: clk,
		tracked: map[string]*tracked{}, pending: map[types.NamespacedName]pendingPod{}}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// targetOnKWOKGroup creates a KWOK group name (1 minute launches, 4-cpu
// nodes) with one node, name-a, and a Headroom name of 1-cpu units with a
// 5 s, 95 % target on the pods labelled app=burst.
func targetOnKWOKGroup(t *testing.T, name string) *v1alpha1.Headroom {
	t.Helper()
	ng := b.NodeGroup(name, b.Size(0, 10), b.InstanceType("c4", "4", "8Gi", b.OnDemand("zone-a", "0.2")))
	ng.Spec.Provider = v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{LaunchDelay: &metav1.Duration{Duration: time.Minute}}}
	node := b.Node(name+"-a", "4", "8Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, name))
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SystemNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{name}},
		Units: &v1alpha1.HeadroomUnits{Count: 2, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "burst"}}}}}
	create(t, ng, node, h)
	return h
}

// burstPod is a 1-cpu pod of app=burst created at created: pending, and
// its bound self on node.
func burstPod(name string, created time.Time, node string) (pending, bound *corev1.Pod) {
	pending = b.Pod(name, b.Namespace("default"), b.CPU("1"), b.Labels("app", "burst"))
	pending.CreationTimestamp = metav1.NewTime(created)
	bound = pending.DeepCopy()
	bound.Spec.NodeName = node
	return pending, bound
}

// TestLearnerLearnsBurstsAndKeepsThemAcrossARestart: bursts of 6 one-cpu
// pods every 10 minutes for two hours, their pods leaving before the
// next; a 5 s, 95 % target in 1-cpu units with a 60 s launch (the KWOK
// group's delay, no node timed). Worked out by hand: every window that
// holds a burst holds exactly 6 units (a burst lasts 5 s, so it never
// straddles two 30 s steps' windows in a way that adds another), so 95 %
// of the demand needs 6 units (the 6 pods that waited, 8 % of 72, raise
// the share asked of the history to 98.3 %: still 6). Pods that waited
// (a failed scheduling attempt, or a nomination to a node launched for a
// burst before the scheduler tried them; bound 70 s later) are measured: the last
// hour's and day's shares within 5 s are what the test made them. The history is saved to its ConfigMap,
// owned by the Headroom, and a new learner (a restart) estimates the same
// from it before it sees another pod.
func TestLearnerLearnsBurstsAndKeepsThemAcrossARestart(t *testing.T) {
	ctx := context.Background()
	h := targetOnKWOKGroup(t, "learn")

	start := time.Now().Truncate(time.Hour).Add(time.Hour)
	clk := clocktesting.NewFakeClock(start)
	l := learner(clk)
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Targets.Get("learn"); got.Estimate.Known {
		t.Fatalf("estimate before any pod: %+v, want learning", got.Estimate)
	}
	waited := 0
	for burst := range 12 {
		at := start.Add(time.Duration(burst)*10*time.Minute + 5*time.Minute)
		clk.SetTime(at)
		var bound []*corev1.Pod
		for i := range 6 {
			p, on := burstPod(fmt.Sprintf("b%d-%d", burst, i), at, "learn-a")
			l.podSeen(nil, p)
			if i == 5 && burst%2 == 0 { // one pod in two bursts waits for a node
				failed := p.DeepCopy()
				if burst%4 == 0 {
					failed.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
				} else { // nominated to a node berth launched before the scheduler tried it
					failed.Status.NominatedNodeName = "learn-a"
				}
				l.podSeen(p, failed)
				p = failed
				clk.SetTime(at.Add(70 * time.Second))
				waited++
			}
			l.podSeen(p, on)
			bound = append(bound, on)
		}
		other, otherOn := burstPod(fmt.Sprintf("other-%d", burst), at, "learn-a")
		other.Labels, otherOn.Labels = map[string]string{"app": "other"}, map[string]string{"app": "other"}
		l.podSeen(other, otherOn) // not selected: counts nowhere
		clk.SetTime(at.Add(4 * time.Minute))
		for _, p := range bound {
			l.podGone(p)
		}
		if err := l.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(start.Add(2*time.Hour + 5*time.Minute)) // past the last window's grace
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := l.Targets.Get("learn")
	if !ok || !got.Estimate.Known || got.Estimate.Units != 6 {
		t.Fatalf("estimate after two hours of bursts of 6: %+v (published %v), want 6 units known", got.Estimate, ok)
	}
	if got.Window != time.Minute {
		t.Errorf("window %s, want the KWOK group's launch delay 1m", got.Window)
	}
	if got.LargestPod != 1 {
		t.Errorf("the largest pod of the last day needs %d units, want 1 (every pod is one unit)", got.LargestPod)
	}
	// The last hour, in ten-minute slots: those from 1:10 to 2:10, the
	// bursts at 1:15 to 1:55 (7 to 11), 30 pods, 2 of which waited 70 s
	// (bursts 8 and 10).
	if m := got.LastHour; m.Pods != 30 || m.Within != 28 {
		t.Errorf("last hour measured %d pods, %d within 5 s; want 30 and 28", m.Pods, m.Within)
	}
	if m := got.LastDay; m.Pods != 72 || m.Within != int64(72-waited) {
		t.Errorf("last day measured %d pods, %d within 5 s; want 72 and %d", m.Pods, m.Within, 72-waited)
	}

	// Saved at shutdown, owned by the Headroom.
	l.saveAll(ctx, true)
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ConfigMapPrefix + "learn"}, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cm) })
	if owner := metav1.GetControllerOf(cm); owner == nil || owner.Name != "learn" || owner.Kind != "Headroom" {
		t.Errorf("history ConfigMap owner %+v, want the Headroom", owner)
	}
	if n := len(cm.Data[historyKey]); n == 0 || n > 64<<10 {
		t.Errorf("history of %d bytes", n)
	}

	// A restart: a new learner loads it and knows at once.
	again := learner(clk)
	if err := again.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Targets.Get("learn"); !got.Estimate.Known || got.Estimate.Units != 6 {
		t.Errorf("estimate after a restart: %+v, want the 6 units learned before", got.Estimate)
	}

	// The Headroom deleted and made again: the old history is not its own.
	var fresh v1alpha1.Headroom
	if err := env.Client.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	h2 := h.DeepCopy()
	h2.ResourceVersion, h2.UID = "", ""
	create(t, h2)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(h2), &fresh); err != nil {
		t.Fatal(err)
	}
	// The garbage collector may have taken the old ConfigMap with the old
	// Headroom: put it back as it was, still owned by the old one, so that
	// only the owner check can keep the new Headroom from using it.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); apierrors.IsNotFound(err) {
		old := cm.DeepCopy()
		old.ResourceVersion, old.UID = "", ""
		if err := env.Client.Create(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	third := learner(clk)
	if err := third.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := third.Targets.Get("learn"); got.Estimate.Known {
		t.Errorf("estimate of a new Headroom of the same name: %+v, want learning (the old history belongs to another)", got.Estimate)
	}
}

// TestPodsThatFinishLeaveTheDemand: Job-like pods of 1 cpu that finish
// (Succeeded) and are never deleted. Every 10 minutes for two hours, the
// 6 pods of the last batch finish as a batch of 8 arrives, and 2 of the 8
// finish 4 minutes later (6 were running before the learner started).
// Worked out by hand: each window with a batch holds 8 pods arrived and
// 6 gone, 2 cpu more; the window with the 2 that finish, less. So a 95 %
// target in 1-cpu units needs 2 units. Counted as staying until they are
// deleted (never, here), finished pods would leave no window, and each
// batch's window would hold 8.
func TestPodsThatFinishLeaveTheDemand(t *testing.T) {
	ctx := context.Background()
	targetOnKWOKGroup(t, "learn-jobs")
	start := time.Now().Truncate(time.Hour).Add(time.Hour)
	clk := clocktesting.NewFakeClock(start)
	l := learner(clk)
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	finish := func(pods []*corev1.Pod) {
		for _, p := range pods {
			done := p.DeepCopy()
			done.Status.Phase = corev1.PodSucceeded
			l.podSeen(p, done)
		}
	}
	var running []*corev1.Pod
	for i := range 6 { // running before the learner watched: their arrival is not seen
		_, on := burstPod(fmt.Sprintf("job-0-%d", i), start, "learn-jobs-a")
		running = append(running, on)
	}
	for batch := 1; batch <= 12; batch++ {
		at := start.Add(time.Duration(batch-1)*10*time.Minute + 5*time.Minute)
		clk.SetTime(at)
		finish(running)
		running = nil
		for i := range 8 {
			p, on := burstPod(fmt.Sprintf("job-%d-%d", batch, i), at, "learn-jobs-a")
			l.podSeen(nil, p)
			l.podSeen(p, on)
			running = append(running, on)
		}
		clk.SetTime(at.Add(4 * time.Minute))
		finish(running[6:])
		running = running[:6]
		if err := l.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(start.Add(2*time.Hour + 5*time.Minute)) // past the last window's grace
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := l.Targets.Get("learn-jobs"); !ok || !got.Estimate.Known || got.Estimate.Units != 2 {
		t.Errorf("estimate after two hours of batches of 8 replacing 6 finished: %+v (published %v), want 2 units known", got.Estimate, ok)
	}
}

// TestTheBurstHistoryOfAStandbyTargetSurvivesARestart: a Headroom with a
// 5 s target and standby units on a group that resumes in 30 s learns
// the demand of the first 30 s of its bursts (every burst of 6 one-cpu
// pods lands at once: 6 units) beside the launch windows', saves both,
// and a new learner (a restart) knows them at once, in the window it
// learned in, even though no resumed node was timed and the group's
// resumeDelay now says 60 s.
func TestTheBurstHistoryOfAStandbyTargetSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("burst", b.Size(0, 10), b.InstanceType("c4", "4", "8Gi", b.OnDemand("zone-a", "0.2")))
	ng.Spec.Provider = v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{LaunchDelay: &metav1.Duration{Duration: 90 * time.Second},
		ResumeDelay: &metav1.Duration{Duration: 30 * time.Second}}}
	node := b.Node("burst-a", "4", "8Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "burst"))
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SystemNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "burst"}, Spec: v1alpha1.HeadroomSpec{
		Scope:   v1alpha1.HeadroomScope{NodeGroups: []string{"burst"}},
		Units:   &v1alpha1.HeadroomUnits{Count: 0, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		Standby: &v1alpha1.StandbyHeadroom{Count: 2},
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "burst"}}}}}
	create(t, ng, node, h)

	l, clk := learnBursts(t, "burst-a", func(burst int, at time.Time) []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range 6 {
			p, _ := burstPod(fmt.Sprintf("s%d-%d", burst, i), at, "burst-a")
			pods = append(pods, p)
		}
		return pods
	})
	got, _ := l.Targets.Get("burst")
	if !got.BurstKnown || got.BurstWindow != 30*time.Second || got.Burst == nil || !got.Burst.Known || got.Burst.Units != 6 {
		t.Fatalf("burst window %s (known %v), estimate %+v; want 30s (30 s resume + 5 s - 5 s) and 6 units known", got.BurstWindow, got.BurstKnown, got.Burst)
	}
	l.saveAll(ctx, true)
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ConfigMapPrefix + "burst"}, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cm) })
	if cm.Data[burstKey] == "" {
		t.Fatalf("the burst history is not saved: keys %v", slices.Collect(maps.Keys(cm.Data)))
	}

	ng.Spec.Provider.KWOK.ResumeDelay = &metav1.Duration{Duration: time.Minute}
	if err := env.Client.Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	again := learner(clk)
	if err := again.round(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = again.Targets.Get("burst")
	if got.BurstWindow != 30*time.Second || got.Burst == nil || !got.Burst.Known || got.Burst.Units != 6 {
		t.Errorf("after a restart: burst window %s, estimate %+v; want the 30s window and its 6 units, known", got.BurstWindow, got.Burst)
	}
}

// learnBursts runs a learner on the real API server for two hours of
// bursts, one every ten minutes from 5 past the next full hour: the pods
// burst gives for each are created and bound at once on node, and leave
// four minutes later. It returns the learner past the last window's
// grace, and its clock.
func learnBursts(t *testing.T, node string, burst func(i int, at time.Time) []*corev1.Pod) (*Learner, *clocktesting.FakeClock) {
	t.Helper()
	ctx := context.Background()
	start := time.Now().Truncate(time.Hour).Add(time.Hour)
	clk := clocktesting.NewFakeClock(start)
	l := learner(clk)
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		at := start.Add(time.Duration(i)*10*time.Minute + 5*time.Minute)
		clk.SetTime(at)
		var bound []*corev1.Pod
		for _, p := range burst(i, at) {
			on := p.DeepCopy()
			on.Spec.NodeName = node
			l.podSeen(nil, p)
			l.podSeen(p, on)
			bound = append(bound, on)
		}
		clk.SetTime(at.Add(4 * time.Minute))
		for _, p := range bound {
			l.podGone(p)
		}
		if err := l.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(start.Add(2*time.Hour + 5*time.Minute))
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// TestTheShapeOfPodsLargerThanAUnitIsLearnedAndKept: bursts of four pods
// of 1 cpu and two of 4 cpu, 1-cpu units. The unit's history counts them
// all (4 + 2 x 4 = 12 units a burst); the pods of 4 cpu are also learned
// apart, as a shape of their own that needs 2 of its units. The learned
// shape is saved beside the history, and a restart knows it at once.
// With spec.target.shapes Unit (and the saved history gone) nothing is
// learned apart.
func TestTheShapeOfPodsLargerThanAUnitIsLearnedAndKept(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("shapes", b.Size(0, 10), b.InstanceType("c16", "16", "32Gi", b.OnDemand("zone-a", "0.8")))
	ng.Spec.Provider = v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{LaunchDelay: &metav1.Duration{Duration: time.Minute}}}
	node := b.Node("shapes-a", "16", "32Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "shapes"))
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SystemNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "shapes"}, Spec: v1alpha1.HeadroomSpec{
		Scope:  v1alpha1.HeadroomScope{NodeGroups: []string{"shapes"}},
		Units:  &v1alpha1.HeadroomUnits{Count: 2, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}}}
	create(t, ng, node, h)
	bursts := func(burst int, at time.Time) []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range 6 {
			p, _ := burstPod(fmt.Sprintf("m%d-%d", burst, i), at, "")
			if i >= 4 {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
			}
			pods = append(pods, p)
		}
		return pods
	}
	l, clk := learnBursts(t, "shapes-a", bursts)
	got, _ := l.Targets.Get("shapes")
	if !got.Estimate.Known || got.Estimate.Units != 12 {
		t.Fatalf("the unit's estimate %+v, want 12 units known (every pod counts)", got.Estimate)
	}
	if len(got.Shapes) != 1 || !got.Shapes[0].Known || got.Shapes[0].Units != 2 || got.Shapes[0].Shape[corev1.ResourceCPU] != 4000 {
		t.Fatalf("learned shapes %+v, want one of 4 cpu needing 2 units", got.Shapes)
	}
	if got.LargestPod != 4 {
		t.Errorf("largest pod %d units, want 4", got.LargestPod)
	}
	l.saveAll(ctx, true)
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ConfigMapPrefix + "shapes"}, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cm) })
	if cm.Data[shapesKey] == "" {
		t.Fatalf("the learned shapes are not saved: keys %v", slices.Collect(maps.Keys(cm.Data)))
	}
	again := learner(clk)
	if err := again.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Targets.Get("shapes"); len(got.Shapes) != 1 || !got.Shapes[0].Known || got.Shapes[0].Units != 2 {
		t.Errorf("after a restart: learned shapes %+v, want the shape of 4 cpu and its 2 units, known", got.Shapes)
	}

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(h), h); err != nil {
		t.Fatal(err)
	}
	h.Spec.Target.Shapes = v1alpha1.TargetShapesUnit
	if err := env.Client.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	// Learn again from nothing: the saved history would be ahead of the
	// bursts replayed at the same times.
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	l, _ = learnBursts(t, "shapes-a", bursts)
	if got, _ := l.Targets.Get("shapes"); len(got.Shapes) != 0 || got.LargestPod != 4 || !got.Estimate.Known || got.Estimate.Units != 12 {
		t.Errorf("with shapes Unit: learned %+v, largest pod %d, estimate %+v; want none, 4 and 12 units", got.Shapes, got.LargestPod, got.Estimate)
	}
}

// TestTheLargestPodIsKeptForADay: the most units one pod needed, by hour,
// over the last 24 hours; an hour's slot taken again a day later starts
// afresh.
func TestTheLargestPodIsKeptForADay(t *testing.T) {
	var l largest
	start := time.Date(2026, 11, 23, 9, 10, 0, 0, time.UTC)
	l.observe(start, 4)
	l.observe(start.Add(time.Hour), 2)
	if got := l.over(start.Add(23 * time.Hour)); got != 4 {
		t.Errorf("23 hours after a 4-unit pod: %d, want 4", got)
	}
	if got := l.over(start.Add(24 * time.Hour)); got != 2 {
		t.Errorf("a day after the 4-unit pod, 23 hours after a 2-unit one: %d, want 2", got)
	}
	l.observe(start.Add(24*time.Hour), 1) // the 4's slot, a day on
	if got := l.over(start.Add(24 * time.Hour)); got != 2 {
		t.Errorf("with the 4's slot taken again by a 1: %d, want 2", got)
	}
	if got := l.over(start.Add(48 * time.Hour)); got != 0 {
		t.Errorf("two days later: %d, want 0", got)
	}
}

// TestHistoriesTooLargeForAConfigMapAreLeftOut: the API server refuses a
// ConfigMap over 1 MiB, and a refused save loses every history of the
// Headroom at the next restart; what does not fit is left out, the
// learned shapes first, then the burst history.
func TestHistoriesTooLargeForAConfigMapAreLeftOut(t *testing.T) {
	big := strings.Repeat("x", 400<<10)
	for _, tc := range []struct {
		name     string
		data     map[string]string
		dropped  []string
		keptKeys int
	}{
		{name: "all fit", data: map[string]string{historyKey: big, shapesKey: "{}"}, keptKeys: 2},
		{name: "the learned shapes go first", data: map[string]string{historyKey: big, burstKey: big, shapesKey: big}, dropped: []string{shapesKey}, keptKeys: 2},
		{name: "then the burst history", data: map[string]string{historyKey: big + big, burstKey: big, shapesKey: "{}"}, dropped: []string{shapesKey, burstKey}, keptKeys: 1},
	} {
		dropped := fitConfigMap(tc.data)
		if !slices.Equal(dropped, tc.dropped) || len(tc.data) != tc.keptKeys {
			t.Errorf("%s: left out %v, kept %d keys; want %v left out and %d kept", tc.name, dropped, len(tc.data), tc.dropped, tc.keptKeys)
		}
	}
}

// TestTheLaunchWindowIsTimedOnTheGroupsNodes: a Headroom with a target
// learns in the time its group's nodes took from launch to Ready (the
// median of each group's nodes berth launched, the slowest group), not in
// the group's configured launch delay; a node berth did not launch is not
// timed; and once the timed nodes are gone the window learned in is kept
// rather than falling back to the configured delay.
func TestTheLaunchWindowIsTimedOnTheGroupsNodes(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("timed", b.Size(0, 10), b.InstanceType("c4", "4", "8Gi", b.OnDemand("zone-a", "0.2")))
	ng.Spec.Provider = v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{LaunchDelay: &metav1.Duration{Duration: time.Minute}}}
	create(t, ng)
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "timed"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"timed"}},
		Units: &v1alpha1.HeadroomUnits{Count: 1, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "timed"}}}}}
	create(t, h)
	// Ready after 40 s, 45 s and 50 s (berth's), and a node of the group
	// berth did not launch, Ready after 10 minutes.
	var timed []*corev1.Node
	for i, boot := range []time.Duration{40 * time.Second, 45 * time.Second, 50 * time.Second, 10 * time.Minute} {
		opts := []b.NodeOption{b.NodeLabels(v1alpha1.LabelNodeGroup, "timed")}
		if i < 3 {
			opts = append(opts, b.LaunchedBy(ng))
		}
		n := b.Node(fmt.Sprintf("timed-%d", i), "4", "8Gi", opts...)
		create(t, n)
		patch := client.MergeFrom(n.DeepCopy())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(n.CreationTimestamp.Add(boot))}}
		if err := env.Client.Status().Patch(ctx, n, patch); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			timed = append(timed, n)
		}
	}
	l := learner(clocktesting.NewFakeClock(time.Now()))
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Targets.Get("timed"); got.Window != 45*time.Second {
		t.Fatalf("window %s, want 45s: the median boot of the group's nodes berth launched (40, 45, 50 s)", got.Window)
	}
	for _, n := range timed {
		if err := env.Client.Delete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range timed {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), &corev1.Node{}); !apierrors.IsNotFound(err) {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Targets.Get("timed"); got.Window != 45*time.Second {
		t.Errorf("window %s after the timed nodes left, want the 45s learned in, not the 1m launch delay", got.Window)
	}
}
