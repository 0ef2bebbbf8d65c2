package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// launches counts the nodes a controller's log says it launched.
func (p *controllerProc) launches(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), `"launched node"`)
}

// TestTwoReplicasActOnceAndFailOver: two replicas run at once with leader
// election (short lease). A burst of pods is served by exactly one of them;
// after the leader is killed (no clean release), the other takes over once
// the lease runs out and serves the next burst; no node is launched twice.
func TestTwoReplicasActOnceAndFailOver(t *testing.T) {
	ns := newNamespace(t)
	createNodeGroup(t, b.NodeGroup("failover", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: 3 * time.Second})))
	lease := []string{"--leader-elect=true", "--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s"}
	replicas := []*controllerProc{startController(t, lease...), startController(t, lease...)}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		l := &coordinationv1.Lease{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "berth-controller"}, l)
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no leader yet", err
	})

	burst := func(prefix string) {
		for i := range 4 {
			createPods(t, b.Pod(fmt.Sprintf("%s-%d", prefix, i), b.Namespace(ns), b.NoUID(), b.CPU("900m"), b.NodeSelector(v1alpha1.LabelNodeGroup, "failover")))
		}
	}
	burst("first")
	waitRunning(t, ns, 4, 2*time.Minute)
	if n := len(groupNodes(t, "failover")); n != 2 {
		t.Fatalf("%d nodes for the first burst, want 2", n)
	}
	leader, standby := replicas[0], replicas[1]
	if leader.launches(t) == 0 {
		leader, standby = standby, leader
	}
	if leader.launches(t) != 2 || standby.launches(t) != 0 {
		t.Fatalf("launches by the replicas: %d and %d, want 2 by one and 0 by the other", leader.launches(t), standby.launches(t))
	}

	leader.kill()
	killed := time.Now()
	burst("second")
	expect.Eventually(t, 2*time.Minute, func(context.Context) (bool, string, error) {
		n := standby.launches(t)
		return n > 0, "the standby has not launched anything yet", nil
	})
	t.Logf("the standby launched its first node %s after the leader was killed (lease duration 6s)", time.Since(killed).Round(100*time.Millisecond))
	waitRunning(t, ns, 8, 2*time.Minute)
	if n := len(groupNodes(t, "failover")); n != 4 {
		t.Errorf("%d nodes after both bursts, want 4 (2 per burst, none twice)", n)
	}
	if n := standby.launches(t); n != 2 {
		t.Errorf("the new leader launched %d nodes, want 2", n)
	}
}
