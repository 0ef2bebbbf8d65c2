package snapshot

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// volumeLookup resolves a pod's PersistentVolumeClaims to the node affinity
// of the PersistentVolumes they are bound to.
type volumeLookup struct {
	claims  map[types.NamespacedName]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
}

func newVolumeLookup(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume) volumeLookup {
	l := volumeLookup{claims: map[types.NamespacedName]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{}}
	for _, c := range claims {
		l.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	for _, v := range volumes {
		l.volumes[v.Name] = v
	}
	return l
}

// nodeAffinities returns the required node affinity of every bound volume
// the pod uses, its generic ephemeral volumes' too (their claim is named
// <pod>-<volume>). A claim that does not exist makes the pod
// unschedulable, as in kube-scheduler, but an ephemeral volume's claim
// not made yet (the ephemeral volume controller makes it); an unbound
// claim is ignored (its volume will be provisioned where the pod lands,
// WaitForFirstConsumer).
func (l volumeLookup) nodeAffinities(pod *corev1.Pod) ([]*nodeaffinity.NodeSelector, string) {
	var out []*nodeaffinity.NodeSelector
	for _, v := range pod.Spec.Volumes {
		var name string
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = pod.Name + "-" + v.Name
		default:
			continue
		}
		claim, ok := l.claims[types.NamespacedName{Namespace: pod.Namespace, Name: name}]
		if !ok && v.Ephemeral != nil {
			continue
		}
		if !ok {
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		}
		if claim.Spec.VolumeName == "" {
			continue
		}
		pv, ok := l.volumes[claim.Spec.VolumeName]
		if !ok {
			return nil, fmt.Sprintf("persistentvolume %q of claim %q not found", claim.Spec.VolumeName, claim.Name)
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		sel, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required)
		if err != nil {
			return nil, fmt.Sprintf("persistentvolume %q has invalid node affinity: %v", pv.Name, err)
		}
		out = append(out, sel)
	}
	return out, ""
}
