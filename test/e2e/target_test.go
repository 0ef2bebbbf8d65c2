package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestTargetLearnsPeriodicBursts (BERTH_E2E_TARGET=1, make e2e-target;
// about 8 minutes): a workload bursts every 45 s (three pods of 1 cpu and
// one of 2 cpu, living 30 s) in a group whose nodes boot in 20 s, with a
// Headroom of 1-cpu units that keeps 0 and targets 90 % of those pods
// within 5 s, learning for at least 2 minutes
// (--headroom-target-min-history). First the bursts wait for a node;
// once berth has learned, the Headroom keeps room for 5 units, one unit
// of them of the 2-cpu pod's shape (status.learnedUnits), and the next
// three bursts get capacity within 5 s without a node launch; the wait
// histogram shows them and status explains the units.
func TestTargetLearnsPeriodicBursts(t *testing.T) {
	if os.Getenv("BERTH_E2E_TARGET") == "" {
		t.Skip("about 8 minutes: set BERTH_E2E_TARGET=1 (make e2e-target)")
	}
	ctx := context.Background()
	ns := newNamespace(t)
	ng := b.NodeGroup("target", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.LaunchDelay(metav1.Duration{Duration: bootDelay}))
	// Idle nodes go within seconds: between bursts nothing but the
	// headroom keeps a node.
	ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: 5 * time.Second}
	createNodeGroup(t, ng)
	ctrl := startController(t, "--headroom-target-min-history=2m", "--scale-down-interval=2s")
	createHeadroom(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "target"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"target"}}, Units: unitsOf(0),
		Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 90,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "burst"}}}}})

	seq := 0
	// burst creates four pods, lets them run 30 s, deletes them, waits
	// 15 s more, and returns each pod's wait for capacity (creation to
	// its PodScheduled condition).
	burst := func() map[string]time.Duration {
		var pods []*corev1.Pod
		for i := range 4 {
			seq++
			cpu, mem := "1", "1Gi"
			if i == 3 {
				cpu, mem = "2", "2Gi"
			}
			p := b.Pod(fmt.Sprintf("burst-%d", seq), b.Namespace(ns), b.NoUID(), b.CPU(cpu), b.Memory(mem),
				b.Labels("app", "burst"), b.NodeSelector(v1alpha1.LabelNodeGroup, "target"))
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			pods = append(pods, p)
		}
		time.Sleep(30 * time.Second)
		waits := map[string]time.Duration{}
		for _, p := range pods {
			got := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				t.Fatal(err)
			}
			waits[p.Name] = time.Hour // not scheduled within 30 s
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					waits[p.Name] = c.LastTransitionTime.Sub(got.CreationTimestamp.Time)
				}
			}
			if err := env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(15 * time.Second)
		return waits
	}
	slow := func(waits map[string]time.Duration) int {
		n := 0
		for _, w := range waits {
			if w > 5*time.Second {
				n++
			}
		}
		return n
	}

	first := burst()
	if slow(first) == 0 {
		t.Fatalf("the first burst, with no headroom yet, did not wait for a node: %v", first)
	}
	// Learn: bursts go on until the target has sized the Headroom and
	// its units are ready. Until then the idle node goes between bursts
	// and each burst waits for a node.
	sized, slowBursts := false, 1
	for i := 0; i < 12 && !sized; i++ {
		if slow(burst()) > 0 {
			slowBursts++
		}
		h := &v1alpha1.Headroom{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "target"}, h); err != nil {
			t.Fatal(err)
		}
		st := h.Status
		sized = st.Target != nil && st.Target.Phase == v1alpha1.TargetSized && st.DesiredUnits >= 4 && st.ReadyUnits == st.DesiredUnits &&
			len(st.LearnedUnits) == 1 && st.LearnedUnits[0].Resources.Cpu().String() == "2"
		if st.Target != nil {
			t.Logf("after burst %d: %s, desired %d ready %d: %s", i+2, st.Target.Phase, st.DesiredUnits, st.ReadyUnits, st.Target.Message)
		}
	}
	if !sized {
		t.Fatal("the target did not size the Headroom to at least 4 ready units, one of the 2-cpu pod's shape, within 12 bursts")
	}
	if slowBursts < 3 {
		t.Errorf("only %d bursts waited for a node while berth was learning: the node of a burst was not removed between bursts, the test shows nothing", slowBursts)
	}
	within := func() float64 {
		for _, mf := range ctrl.metricFamilies(t) {
			if mf.GetName() != "berth_headroom_pod_wait_seconds" {
				continue
			}
			total := 0.0
			for _, m := range mf.GetMetric() {
				for _, bk := range m.GetHistogram().GetBucket() {
					if bk.GetUpperBound() == 5 {
						total += float64(bk.GetCumulativeCount())
					}
				}
			}
			return total
		}
		return 0
	}
	before := within()
	nodesBefore := nodeNames(groupNodes(t, "target"))
	for i := range 3 {
		waits := burst()
		if n := slow(waits); n > 0 {
			t.Errorf("learned burst %d: %d of 4 pods waited more than 5 s: %v", i+1, n, waits)
		}
	}
	if got := within() - before; got < 12 {
		t.Errorf("berth_headroom_pod_wait_seconds counted %v more pods within 5 s over the three learned bursts, want 12", got)
	}
	h := &v1alpha1.Headroom{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "target"}, h); err != nil {
		t.Fatal(err)
	}
	ts := h.Status.Target
	if ts == nil || ts.Phase != v1alpha1.TargetSized || !strings.Contains(ts.Message, "fits in") || ts.LastHour == nil {
		t.Errorf("status.target %+v, want Sized with the units explained and the last hour measured", ts)
	}
	t.Logf("status.target: %s; last hour %+v; %d bursts waited while learning; nodes before the learned bursts %d, after %d",
		ts.Message, ts.LastHour, slowBursts, len(nodesBefore), len(groupNodes(t, "target")))
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		cm := &corev1.ConfigMap{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "berth-demand-target"}, cm)
		return err == nil, fmt.Sprintf("history ConfigMap: %v", err), nil
	})
}
