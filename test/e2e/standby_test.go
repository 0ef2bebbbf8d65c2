package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestStandbyNodesAreSuspendedThenResumedForABurst: a Headroom keeps 4
// standby units of 1 cpu on 2-cpu nodes that boot in 40 s and resume in
// 1 s. berth launches 2 standby nodes and suspends them once Ready; a
// burst of 2 pods then runs on a resumed standby node, not on a node
// launched for it; berth launches a standby node to keep 4 units; and
// with the count lowered to 0 it deletes the suspended nodes, not the
// resumed one the burst runs on.
func TestStandbyNodesAreSuspendedThenResumedForABurst(t *testing.T) {
	const group, launch = "hr-standby", 40 * time.Second
	ns := newNamespace(t)
	ng := b.NodeGroup(group, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.LaunchDelay(metav1.Duration{Duration: launch}))
	ng.Spec.Provider.KWOK.ResumeDelay = &metav1.Duration{Duration: time.Second}
	createNodeGroup(t, ng)
	startController(t)
	createHeadroom(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: group}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{group}}, Units: unitsOf(0), Standby: &v1alpha1.StandbyHeadroom{Count: 4}}})
	st := waitHeadroom(t, group, launch+time.Minute, func(s v1alpha1.HeadroomStatus) bool {
		return s.Standby != nil && s.Standby.Units == 4 && s.Standby.Nodes == 2 && s.Standby.Booting == 0
	})
	if st.Standby.CostPerHour != "0.0200" {
		t.Errorf("standby cost %q, want 0.0200 (two suspended nodes at a tenth of 0.10)", st.Standby.CostPerHour)
	}
	suspended := map[string]bool{}
	for _, n := range groupNodes(t, group) {
		if !nodeutil.Suspended(&n) || nodeutil.Ready(&n) {
			t.Fatalf("node %s: standby %v, suspended-at %q, ready %v; want every node suspended and NotReady",
				n.Name, nodeutil.Standby(&n), n.Annotations[v1alpha1.AnnotationSuspendedAt], nodeutil.Ready(&n))
		}
		suspended[n.Name] = true
	}
	if len(suspended) != 2 {
		t.Fatalf("%d nodes for 4 standby units of 1 cpu on 2-cpu nodes, want 2", len(suspended))
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		got := &v1alpha1.NodeGroup{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: group}, got); err != nil {
			return false, "", err
		}
		by := got.Status.NodesByState
		return by.Standby == 2 && by.NotReady == 0, fmt.Sprintf("node group counts %+v, want 2 standby and none NotReady", by), nil
	})
	// KWOK leaves a suspended node alone: it is still NotReady a while later.
	time.Sleep(5 * time.Second)
	for _, n := range groupNodes(t, group) {
		if nodeutil.Ready(&n) {
			t.Fatalf("suspended node %s turned Ready on its own", n.Name)
		}
	}

	start := time.Now()
	if err := env.Client.Create(context.Background(), deployment(ns, "burst", 2, b.CPU("1"), b.Memory("1Gi"),
		b.NodeSelector(v1alpha1.LabelNodeGroup, group))); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, 2, launch+30*time.Second)
	t.Logf("burst of 2 pods running %s after it was created (a launch takes %s)", time.Since(start).Round(time.Second), launch)
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	resumed := ""
	for _, p := range pods.Items {
		if !suspended[p.Spec.NodeName] {
			t.Errorf("pod %s runs on %s, not on a resumed standby node (%v)", p.Name, p.Spec.NodeName, suspended)
		}
		resumed = p.Spec.NodeName
	}
	node := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: resumed}, node); err != nil {
		t.Fatal(err)
	}
	if nodeutil.Standby(node) || node.Annotations[v1alpha1.AnnotationResumedAt] == "" {
		t.Errorf("node %s runs the burst but is still standby (%v) or has no resumed-at annotation", resumed, node.Spec.Taints)
	}

	// The standby tier is refilled: 4 units on 2 suspended nodes again, one
	// of them new.
	waitHeadroom(t, group, launch+time.Minute, func(s v1alpha1.HeadroomStatus) bool {
		return s.Standby != nil && s.Standby.Units == 4 && s.Standby.Nodes == 2 && s.Standby.Booting == 0
	})
	if n := len(groupNodes(t, group)); n != 3 {
		t.Errorf("%d nodes after the refill, want 3 (the resumed one and two suspended)", n)
	}
	ev := events(t, "", group)
	if !containsPrefix(ev, "StandbyLaunched: ") {
		t.Errorf("events on the headroom: %q", ev)
	}

	h := &v1alpha1.Headroom{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: group}, h); err != nil {
		t.Fatal(err)
	}
	h.Spec.Standby.Count = 0
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	waitHeadroom(t, group, time.Minute, func(s v1alpha1.HeadroomStatus) bool {
		return s.Standby != nil && s.Standby.DesiredUnits == 0 && s.Standby.Nodes == 0 && s.Standby.Booting == 0
	})
	left := groupNodes(t, group)
	if len(left) != 1 || left[0].Name != resumed {
		t.Errorf("nodes left after standby count 0: %v, want only %s (it runs the burst)", nodeNames(left), resumed)
	}
}
