package provisioning_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestListedDaemonSetPodsSayTheOverhead: a LimitRange gives every
// container of the namespace 1500m of cpu when it asks for none, and a
// DaemonSet whose template asks for none runs on the group's nodes. The
// API server admits its pod on the group's one node (cordoned) with
// 1500m, which the template does not say. A pending pod of 1 cpu then
// needs a node of 4 cpu: one of 2 would have 500m left beside the
// DaemonSet's pod, and kube-scheduler would not place the pod there.
// Here a round run alone, which lists every pod.
// (Karpenter's "should account for overhead using daemonset pod spec
// instead of daemonset spec".)
func TestListedDaemonSetPodsSayTheOverhead(t *testing.T) { daemonSetPodsSayTheOverhead(t, false) }

// TestIndexedDaemonSetPodsSayTheOverhead: as
// TestListedDaemonSetPodsSayTheOverhead, the provisioner run as the
// controller runs it.
func TestIndexedDaemonSetPodsSayTheOverhead(t *testing.T) { daemonSetPodsSayTheOverhead(t, true) }

func daemonSetPodsSayTheOverhead(t *testing.T, informers bool) {
	name := "listed"
	if informers {
		name = "indexed"
	}
	{
		{
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := setup(t, b.NodeGroup("prov-dspod-"+name,
				b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
				b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.16")),
				b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
			f.daemonSetAdmittedWith1500m()
			t.Cleanup(f.deletePods) // before the namespace: later tests count the pending pods of the cluster
			if !informers {
				f.pods(1, b.CPU("1"))
				res := f.run()
				if len(res.Plan.NewNodes) != 1 || res.Plan.NewNodes[0].InstanceType != "m-4" {
					t.Fatalf("planned %+v, want one m-4: an m-2 has 500m beside the DaemonSet's pod", res.Plan.NewNodes)
				}
				return
			}
			if types := f.launchedForOneCPU(ctx); len(types) != 1 || types[0] != "m-4" {
				t.Errorf("launched %v, want one m-4: an m-2 has 500m beside the DaemonSet's pod", types)
			}
		}
	}
}

// daemonSetAdmittedWith1500m makes the fixture's namespace give 1500m of
// cpu to a container that asks for none, launches one m-2 node of the
// group, creates a DaemonSet that asks for nothing and runs on the
// group's nodes, awaits its pod on the node, and cordons the node.
func (f *fixture) daemonSetAdmittedWith1500m() {
	f.t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, f.defaults1500m()); err != nil {
		f.t.Fatal(err)
	}
	ng := &v1alpha1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.group}, ng); err != nil {
		f.t.Fatal(err)
	}
	ng.Spec.Provider.KWOK.LaunchDelay = nil // Ready at once: the DaemonSet's pod lands there
	inst, err := kwok.New(env.Client, clock.RealClock{}).Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng,
		Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := env.Client.Create(ctx, f.agent()); err != nil {
		f.t.Fatal(err)
	}
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(f.ns)); err != nil {
			return false, "", err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if podutil.IsOwnedByDaemonSet(p) && p.Spec.NodeName == inst.NodeName {
				got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
				if got.Cmp(resource.MustParse("1500m")) != 0 {
					return false, "", fmt.Errorf("the DaemonSet's pod requests %s cpu, want the LimitRange's 1500m", got.String())
				}
				return true, "", nil
			}
		}
		return false, "the DaemonSet's pod is not on " + inst.NodeName + " yet", nil
	})
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, node); err != nil {
		f.t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = true
	if err := env.Client.Patch(ctx, node, patch); err != nil {
		f.t.Fatal(err)
	}
}

// deletePods deletes the pods of the fixture's namespace (and the
// DaemonSet, which would make them again) and awaits their end.
func (f *fixture) deletePods() {
	ctx := context.Background()
	_ = env.Client.DeleteAllOf(ctx, &appsv1.DaemonSet{}, client.InNamespace(f.ns))
	_ = env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(f.ns), client.GracePeriodSeconds(0))
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		err := env.Client.List(ctx, pods, client.InNamespace(f.ns))
		return err == nil && len(pods.Items) == 0, fmt.Sprintf("%d pods left", len(pods.Items)), err
	})
}

// TestADaemonSetOnNoNodeYetHoldsWhatItsLimitRangeGives: scale from zero.
// A DaemonSet whose template asks for nothing runs on the group's nodes,
// of which there are none: it has no pod to read. Its namespace's
// LimitRange gives every container 1500m of cpu when it asks for none,
// so its first pod will ask for 1500m; a pending pod of 1 cpu needs a
// node of 4 cpu, not 2. The provisioner runs as the controller runs it,
// reading the LimitRange from the manager's cache.
func TestADaemonSetOnNoNodeYetHoldsWhatItsLimitRangeGives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := setup(t, b.NodeGroup("prov-dsnopod",
		b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.16")),
		b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	for _, o := range []client.Object{f.defaults1500m(), f.agent()} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(f.deletePods) // before the namespace: later tests count the pending pods of the cluster
	if types := f.launchedForOneCPU(ctx); len(types) != 1 || types[0] != "m-4" {
		t.Errorf("launched %v, want one m-4: an m-2 has 500m beside the DaemonSet's first pod", types)
	}
}

// defaults1500m is a LimitRange of the fixture's namespace that gives
// 1500m of cpu to a container that asks for none.
func (f *fixture) defaults1500m() *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: f.ns}, Spec: corev1.LimitRangeSpec{
		Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}
}

// agent is a DaemonSet of the fixture's namespace that asks for nothing
// and runs on the group's nodes.
func (f *fixture) agent() *appsv1.DaemonSet {
	labels := map[string]string{"app": "agent"}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: f.ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group},
			Containers:   []corev1.Container{{Name: "agent", Image: "agent"}}}}}}
}

// launchedForOneCPU runs the provisioner as the controller runs it,
// creates a pending pod of 1 cpu, and returns the instance types of the
// group's nodes not cordoned once one is launched.
func (f *fixture) launchedForOneCPU(ctx context.Context) []string {
	f.t.Helper()
	f.runAsTheController(ctx)
	f.pods(1, b.CPU("1"))
	var types []string
	expect.Eventually(f.t, 45*time.Second, func(ctx context.Context) (bool, string, error) {
		types = nil
		for _, n := range f.nodes() {
			if !n.Spec.Unschedulable {
				types = append(types, n.Labels[corev1.LabelInstanceTypeStable])
			}
		}
		return len(types) > 0, "no node launched yet", nil
	})
	return types
}
