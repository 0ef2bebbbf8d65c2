package reserve_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/reserve"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

func isReserve(p *corev1.Pod) bool { return p.Labels[v1alpha1.LabelHeadroomRole] == "node-reserve" }

func reservePod(name, node string) *corev1.Pod {
	return b.Pod(name, b.NodeName(node), b.CPU("500m"), b.Labels(v1alpha1.LabelHeadroomRole, "node-reserve"))
}

func TestChoose(t *testing.T) {
	nodes := []*corev1.Node{b.Node("a", "2", "4Gi", b.NodeLabels("pool", "x")), b.Node("b", "2", "4Gi", b.NodeLabels("pool", "y"))}
	full := []*corev1.Pod{
		reservePod("ra", "a"), b.Pod("wa", b.NodeName("a"), b.CPU("1500m")),
		reservePod("rb", "b"), b.Pod("wb", b.NodeName("b"), b.CPU("1500m")),
	}
	nominated := func(name, node string, prio int32) *corev1.Pod {
		p := b.Pod(name, b.CPU("500m"), b.Priority(prio))
		p.Status.NominatedNodeName = node
		return p
	}
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		nominated []*corev1.Pod
		pod       *corev1.Pod
		wantNode  string
		wantErr   bool
	}{
		{name: "a pod that fits in the reserve slice takes the first node's reserve", pods: full,
			pod: b.Pod("burst", b.CPU("500m")), wantNode: "a"},
		{name: "the pod's node selection is respected", pods: full,
			pod: b.Pod("burst", b.CPU("500m"), b.NodeSelector("pool", "y")), wantNode: "b"},
		{name: "a pod bigger than the slice fits nowhere", pods: full,
			pod: b.Pod("burst", b.CPU("1")), wantErr: true},
		{name: "a slice already handed to a pod of the same priority is not handed out again", pods: full,
			nominated: []*corev1.Pod{nominated("earlier", "a", 1000000000)},
			pod:       b.Pod("burst", b.CPU("500m"), b.Priority(1000000000)), wantNode: "b"},
		{name: "a lower-priority nomination does not hold the slice (the scheduler would not count it either)", pods: full,
			nominated: []*corev1.Pod{nominated("earlier", "a", 0)},
			pod:       b.Pod("burst", b.CPU("500m"), b.Priority(1000000000)), wantNode: "a"},
		{name: "when every slice is handed out there is none left", pods: full,
			nominated: []*corev1.Pod{nominated("first", "a", 1000000000), nominated("second", "b", 1000000000)},
			pod:       b.Pod("burst", b.CPU("500m"), b.Priority(1000000000)), wantErr: true},
		{name: "without reserve pods there is nothing to take", pods: []*corev1.Pod{b.Pod("wa", b.NodeName("a"), b.CPU("2"))},
			pod: b.Pod("burst", b.CPU("500m")), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := reserve.Choose(reserve.Input{Nodes: nodes, Pods: tt.pods, Nominated: tt.nominated, Pod: tt.pod, IsReserve: isReserve})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got node %s, want an error", d.Node)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Node != tt.wantNode || !isReserve(d.Reserve) || d.Reserve.Spec.NodeName != tt.wantNode {
				t.Errorf("got node %s reserve %s, want node %s", d.Node, d.Reserve.Name, tt.wantNode)
			}
		})
	}
}

// TestAPodWithAVolumeTakesAReserve: a burst-critical pod with a bound
// PersistentVolumeClaim (a StatefulSet's) takes a reserve slice where its
// volume may be used: node b, where the volume's node affinity points.
// Before, the claims were not given to the choice: the pod fit no node,
// and was told so.
func TestAPodWithAVolumeTakesAReserve(t *testing.T) {
	nodes := []*corev1.Node{b.Node("a", "2", "4Gi"), b.Node("b", "2", "4Gi")}
	pods := []*corev1.Pod{
		reservePod("ra", "a"), b.Pod("wa", b.NodeName("a"), b.CPU("1500m")),
		reservePod("rb", "b"), b.Pod("wb", b.NodeName("b"), b.CPU("1500m")),
	}
	pod := b.Pod("burst", b.CPU("500m"), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: pod.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: corev1.PersistentVolumeSpec{
		ClaimRef: &corev1.ObjectReference{Namespace: pod.Namespace, Name: "data"},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}},
		}}}}}}
	d, err := reserve.Choose(reserve.Input{Nodes: nodes, Pods: pods, Pod: pod, IsReserve: isReserve,
		Claims: []*corev1.PersistentVolumeClaim{pvc}, Volumes: []*corev1.PersistentVolume{pv}})
	if err != nil || d.Node != "b" {
		t.Fatalf("Choose = %+v, %v; want node b, where the pod's volume is", d, err)
	}
}
