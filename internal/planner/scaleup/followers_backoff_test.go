package scaleup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestALeaderWaitsForItsFollowersZoneInBackoff: cache follows app and
// uses a volume in zone-b, whose offering just failed (launch backoff:
// unavailable this round). zone-b is still a place app can go, later: app
// is not planned in zone-a, where cache could never follow it (a zone-a
// node would be paid for while cache waits for ever). A zone no offering
// has is another matter (follower-zonal-volume-nowhere).
func TestALeaderWaitsForItsFollowersZoneInBackoff(t *testing.T) {
	ng := b.NodeGroup("general", b.Size(0, 20), b.InstanceType("m-4", "4", "16Gi",
		b.OnDemand("zone-a", "0.20"), b.OnDemand("zone-b", "0.30")))
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}}}}}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	app := b.Pod("app", b.CPU("2"), b.Labels("app", "web"))
	cache := b.Pod("cache", b.CPU("1"), b.PodAffinity(corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}))
	cache.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: []*corev1.Pod{app, cache},
		Claims: []*corev1.PersistentVolumeClaim{pvc}, Volumes: []*corev1.PersistentVolume{pv},
		Unavailable: []scaleup.Offering{{NodeGroup: "general", InstanceType: "m-4", Zone: "zone-b", CapacityType: string(v1alpha1.CapacityTypeOnDemand)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range plan.NewNodes {
		t.Errorf("launched %s in %s for %v while cache's zone-b is in backoff: cache could never follow app there", n.InstanceType, n.Zone, n.Pods)
	}
}
