package scaleup_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestTaintsThatGoAwayOnTheirOwn: a node of berth's takes a pending pod
// while its startup taint, the cloud controller manager's uninitialized
// taint and the node lifecycle's not-ready taint are only those of a
// node coming up (it was launched within the launch grace, or, its age
// unknown, it is not Ready and initialized yet). Past that, a startup or
// uninitialized taint still there stays (the agent that removes it
// failed): the pod gets a new node, as kube-scheduler would never put it
// there.
func TestTaintsThatGoAwayOnTheirOwn(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: "agent.example.com/not-ready", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	startup := b.NodeTaint("agent.example.com/not-ready", "", corev1.TaintEffectNoSchedule)
	uninitialized := b.NodeTaint(scaleup.TaintCloudUninitialized, "true", corev1.TaintEffectNoSchedule)
	notReady := func(n *corev1.Node) {
		b.NotReady()(n)
		b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)(n)
	}
	age := func(d time.Duration) b.NodeOption {
		return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(now.Add(-d)) }
	}
	uninitializedLabel := func(n *corev1.Node) { delete(n.Labels, v1alpha1.LabelInitialized) }
	onIt := []string{"on n: web"}
	newNode := []string{"new zone-a/on-demand/m-2: web"}
	tests := []struct {
		name string
		node []b.NodeOption
		want []string
	}{
		{"a node launched a minute ago, not Ready yet, with every taint of a node coming up", []b.NodeOption{age(time.Minute), notReady, startup, uninitialized}, onIt},
		{"a node Ready a moment ago whose agent has not removed its startup taint yet", []b.NodeOption{age(2 * time.Minute), startup}, onIt},
		{"a node whose startup taint is still there an hour after its launch", []b.NodeOption{age(time.Hour), startup}, newNode},
		{"a node the cloud controller manager has not initialized an hour after its launch", []b.NodeOption{age(time.Hour), uninitialized}, newNode},
		{"a hand-written node, Ready and initialized, with its startup taint", []b.NodeOption{startup}, newNode},
		{"a hand-written node not Ready yet with its startup taint", []b.NodeOption{uninitializedLabel, notReady, startup}, onIt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := groupNode("n", ng, "m-2", "zone-a", v1alpha1.CapacityTypeOnDemand)
			b.LaunchedBy(ng)(n)
			for _, o := range tt.node {
				o(n)
			}
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Nodes: []*corev1.Node{n},
				Pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))}, Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summary(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestANodeBeingDeletedTakesNoPod: a node someone deletes (a finalizer
// holds it) has room, but a pod bound there would go with it: the pod
// gets a new node, as Karpenter has it.
func TestANodeBeingDeletedTakesNoPod(t *testing.T) {
	ng := b.NodeGroup("g", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	n := b.Node("going", "4", "16Gi", func(n *corev1.Node) {
		n.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		n.Finalizers = []string{"example.com/hold"}
	})
	runPlanCases(t, []planCase{{name: "deleting", groups: []*v1alpha1.NodeGroup{ng}, nodes: []*corev1.Node{n},
		pending: []*corev1.Pod{b.Pod("web", b.CPU("1"))}, want: []string{"new zone-a/on-demand/m-2: web"}}})
}
