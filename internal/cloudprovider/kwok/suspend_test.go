package kwok_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/nodeutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestSuspendedNodesStayNotReadyUntilResumed: a standby node registers
// with the standby taint; suspended, KWOK leaves it NotReady; resumed, it
// loses the standby marks and is Ready after the resume delay. A node
// marked for removal is not resumed.
func TestSuspendedNodesStayNotReadyUntilResumed(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("kwok-standby", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Provider.KWOK.ResumeDelay = &metav1.Duration{Duration: 2 * time.Second}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, ng)
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{v1alpha1.LabelNodeGroup: ng.Name})
	})
	p := kwok.New(env.Client, clock.RealClock{})
	launch := func() string {
		inst, err := p.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, StandbyFor: "web",
			Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
		if err != nil {
			t.Fatal(err)
		}
		expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
			n := get(t, inst.NodeName)
			return nodeutil.Ready(n), "not Ready yet", nil
		})
		return inst.NodeName
	}
	name := launch()
	if n := get(t, name); !nodeutil.Standby(n) || n.Annotations[v1alpha1.AnnotationStandbyFor] != "web" {
		t.Fatalf("standby node: taints %v, annotations %v", n.Spec.Taints, n.Annotations)
	}
	if err := p.Suspend(ctx, name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // longer than any KWOK stage delay here
	if n := get(t, name); nodeutil.Ready(n) || !nodeutil.Suspended(n) {
		t.Fatalf("suspended node: ready %v, suspended %v", nodeutil.Ready(n), nodeutil.Suspended(n))
	}
	start := time.Now()
	if err := p.Resume(ctx, name); err != nil {
		t.Fatal(err)
	}
	if n := get(t, name); nodeutil.Standby(n) || n.Labels[v1alpha1.TaintStandby] != "" || n.Annotations[v1alpha1.AnnotationResumedAt] == "" ||
		n.Annotations[v1alpha1.AnnotationSuspendedAt] != "" {
		t.Fatalf("resumed node: taints %v, labels %v, annotations %v", n.Spec.Taints, n.Labels, n.Annotations)
	}
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		return nodeutil.Ready(get(t, name)), "resumed node not Ready yet", nil
	})
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("resumed node Ready after %s, before its resume delay of 2s", took)
	}

	marked := launch()
	if err := p.Suspend(ctx, marked); err != nil {
		t.Fatal(err)
	}
	n := get(t, marked)
	patch := client.MergeFrom(n.DeepCopy())
	n.Annotations[v1alpha1.AnnotationStandbyRemoving] = time.Now().UTC().Format(time.RFC3339)
	if err := env.Client.Patch(ctx, n, patch); err != nil {
		t.Fatal(err)
	}
	if err := p.Resume(ctx, marked); err == nil {
		t.Error("a standby node marked for removal was resumed")
	}
}

func get(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}
