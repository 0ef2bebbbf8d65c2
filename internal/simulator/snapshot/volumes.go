package snapshot

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/internal/podutil"
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
// the pod uses, compiled (VolumeSelectors).
//
// keys are the node label keys the bound volumes' node affinities read:
// the planner checks them on each offering of a planned node where they
// name a label that differs between its offerings (an instance type).
func (l volumeLookup) nodeAffinities(pod *corev1.Pod) (out []*nodeaffinity.NodeSelector, keys sets.Set[string], why string) {
	sels, keys, why := l.selectors(pod)
	if why != "" {
		return nil, nil, why
	}
	for _, s := range sels {
		sel, err := nodeaffinity.NewNodeSelector(s.NodeSelector)
		if err != nil {
			return nil, nil, fmt.Sprintf("persistentvolume %q has invalid %s: %v", s.volume, s.what, err)
		}
		out = append(out, sel)
	}
	return out, keys, ""
}

// volumeSelector is one node selection a bound volume requires, with the
// volume's name and what of it the selection is (for errors).
type volumeSelector struct {
	*corev1.NodeSelector
	volume, what string
}

// Volumes resolves pods' volumes to the node selections they require
// (Selectors), from a cluster's claims and PersistentVolumes.
type Volumes struct{ l volumeLookup }

// NewVolumes indexes claims and volumes for Selectors.
func NewVolumes(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume) Volumes {
	return Volumes{l: newVolumeLookup(claims, volumes)}
}

// Selectors returns the node selections the pod's volumes require (every
// one must match a node the pod runs on), as kube-scheduler's VolumeZone
// and VolumeBinding read them: the zone and region labels of the
// PersistentVolumes its claims are bound to, and their node affinity; a
// generic ephemeral volume's node affinity too (its claim is named
// <pod>-<volume>). An unbound claim, or an ephemeral volume's claim not
// made yet, requires nothing (its volume is provisioned where the pod
// lands). why is not empty when a volume takes the pod nowhere: a claim
// that does not exist, is lost or being deleted, an ephemeral claim made
// for another pod, a volume that does not exist.
func (v Volumes) Selectors(pod *corev1.Pod) (out []*corev1.NodeSelector, why string) {
	sels, _, why := v.l.selectors(pod)
	for _, s := range sels {
		out = append(out, s.NodeSelector)
	}
	return out, why
}

// OncePodClaims reports whether the pod uses a claim of the
// ReadWriteOncePod access mode (one pod at a time may use it).
func (v Volumes) OncePodClaims(pod *corev1.Pod) bool { return len(v.l.oncePodClaims(pod)) > 0 }

func (l volumeLookup) selectors(pod *corev1.Pod) (out []volumeSelector, keys sets.Set[string], why string) {
	for _, v := range pod.Spec.Volumes {
		key, ok := podutil.VolumeClaim(pod, &v)
		if !ok {
			continue
		}
		name := key.Name
		claim, ok := l.claims[key]
		if !ok && v.Ephemeral != nil {
			continue
		}
		if !ok {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		}
		// In VolumeBinding's order: a claim whose volume is gone, or that
		// is being deleted, takes the pod nowhere.
		if claim.Status.Phase == corev1.ClaimLost {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", claim.Name, claim.Spec.VolumeName)
		}
		if claim.DeletionTimestamp != nil {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", claim.Name)
		}
		if v.Ephemeral != nil && pod.UID != "" && !ownedBy(claim, pod) {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q was not created for the pod", name)
		}
		if claim.Spec.VolumeName == "" {
			continue
		}
		pv, ok := l.volumes[claim.Spec.VolumeName]
		if !ok {
			return nil, nil, fmt.Sprintf("persistentvolume %q of claim %q not found", claim.Spec.VolumeName, claim.Name)
		}
		zones := zoneLabelSelectors(pv)
		if v.Ephemeral != nil {
			zones = nil // VolumeZone reads the zone labels of the claims a pod names only
		}
		for _, zone := range zones {
			out = append(out, volumeSelector{NodeSelector: zone, volume: pv.Name, what: "zone labels"})
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		out = append(out, volumeSelector{NodeSelector: pv.Spec.NodeAffinity.Required, volume: pv.Name, what: "node affinity"})
		for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				if keys == nil {
					keys = sets.New[string]()
				}
				keys.Insert(r.Key)
			}
		}
	}
	return out, keys, ""
}

// oncePodClaims are the claims of the pod's volumes (in its namespace)
// with the ReadWriteOncePod access mode: one pod at a time may use each,
// as kube-scheduler's VolumeRestrictions has it.
func (l volumeLookup) oncePodClaims(pod *corev1.Pod) []types.NamespacedName {
	var out []types.NamespacedName
	for _, v := range pod.Spec.Volumes {
		key, ok := podutil.VolumeClaim(pod, &v)
		if !ok {
			continue
		}
		if claim, ok := l.claims[key]; ok && slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteOncePod) {
			out = append(out, key)
		}
	}
	return out
}

// volumeTopologyLabels are the labels of a PersistentVolume that
// kube-scheduler's VolumeZone filter reads (volumes provisioned before
// node affinity, by in-tree plugins), with the GA label a node may carry
// instead of a beta one.
var volumeTopologyLabels = []struct{ key, ga string }{
	{corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyZone},
	{corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyRegion},
	{corev1.LabelTopologyZone, corev1.LabelTopologyZone},
	{corev1.LabelTopologyRegion, corev1.LabelTopologyRegion},
}

// zoneLabelSelectors are the node selections a volume's zone and region
// labels require, as VolumeZone checks them: the node's label (or its GA
// name) is one of the "__"-separated values, or the node has no topology
// label at all (a single-zone cluster).
func zoneLabelSelectors(pv *corev1.PersistentVolume) []*corev1.NodeSelector {
	var out []*corev1.NodeSelector
	for _, l := range volumeTopologyLabels {
		value, ok := pv.Labels[l.key]
		if !ok {
			continue
		}
		var values []string
		for v := range strings.SplitSeq(value, "__") {
			values = append(values, strings.TrimSpace(v))
		}
		if slices.Contains(values, "") {
			continue // kube-scheduler ignores a label it cannot read (an empty zone, "a____b")
		}
		terms := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: l.key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}
		if l.ga != l.key {
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: l.ga, Operator: corev1.NodeSelectorOpIn, Values: values}}})
		}
		none := corev1.NodeSelectorTerm{}
		for _, t := range volumeTopologyLabels {
			none.MatchExpressions = append(none.MatchExpressions, corev1.NodeSelectorRequirement{Key: t.key, Operator: corev1.NodeSelectorOpDoesNotExist})
		}
		out = append(out, &corev1.NodeSelector{NodeSelectorTerms: append(terms, none)})
	}
	return out
}

// ownedBy reports whether the pod controls the claim, as the ephemeral
// volume controller makes a generic ephemeral volume's claim: a claim of
// that name made otherwise is not the pod's, and kube-scheduler refuses
// the pod.
func ownedBy(claim *corev1.PersistentVolumeClaim, pod *corev1.Pod) bool {
	owner := metav1.GetControllerOf(claim)
	return owner != nil && owner.UID == pod.UID
}
