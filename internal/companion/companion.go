// Package companion says, once for berth's admission webhook and its
// companion controller, which pods a CompanionProfile selects, how big
// their companion is and which workloads share one. It is pure: objects
// in (through the narrow Lookup interface), answers out.
package companion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/quantity"
)

// Lookup reads the objects a profile's rules need. Implementations return
// nil when an object does not exist.
type Lookup interface {
	NamespaceLabels(ctx context.Context, name string) (labels.Set, error)
	Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	Volume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error)
}

// Validate returns why berth cannot apply profile p, or nil: a selector
// its code rejects, or no namespace for the companions. The API server
// refuses such profiles (CRD validation); one stored before that, or
// whose selector only the code rejects (a label key with a space),
// selects and recognises no pod, so that it never holds a gate or takes
// anyone's room.
func Validate(p *v1alpha1.CompanionProfile) error {
	if p.Spec.Recognize.Namespace == "" {
		return errors.New("spec.recognize.namespace is empty: companions would be recognised in every namespace")
	}
	for _, s := range []struct {
		field string
		sel   *metav1.LabelSelector
	}{
		{"spec.workloads.namespaceSelector", p.Spec.Workloads.NamespaceSelector},
		{"spec.workloads.podSelector", p.Spec.Workloads.PodSelector},
		{"spec.recognize.selector", &p.Spec.Recognize.Selector},
	} {
		if s.sel == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(s.sel); err != nil {
			return fmt.Errorf("%s: %w", s.field, err)
		}
	}
	return nil
}

// Selects reports whether profile p selects pod. A pod of berth's own
// (placeholders) is never selected, nor any pod by a profile that is not
// valid (Validate), nor a pod berth never places: a DaemonSet's (its
// node is chosen by the DaemonSet controller, and berth never nominates
// one: gated, it would wait the whole ungateAfter on every node) and one
// created with its node set.
func Selects(ctx context.Context, p *v1alpha1.CompanionProfile, pod *corev1.Pod, l Lookup) (bool, error) {
	if isBerths(pod) || podutil.IsOwnedByDaemonSet(pod) || pod.Spec.NodeName != "" || Validate(p) != nil {
		return false, nil
	}
	w := &p.Spec.Workloads
	if ok, err := matches(w.PodSelector, labels.Set(pod.Labels)); !ok || err != nil {
		return false, err
	}
	if w.NamespaceSelector != nil {
		nsLabels, err := l.NamespaceLabels(ctx, pod.Namespace)
		if err != nil {
			return false, err
		}
		if ok, err := matches(w.NamespaceSelector, nsLabels); !ok || err != nil {
			return false, err
		}
	}
	if w.CSIDriver == "" {
		return true, nil
	}
	v, err := driverVolume(ctx, w.CSIDriver, pod, l)
	return v.selected, err
}

func matches(sel *metav1.LabelSelector, set labels.Set) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(set), nil
}

// volume is what a pod mounts of a CSI driver: selected when one of its
// claims is of the driver; pv is the bound volume, if any.
type volume struct {
	selected bool
	pv       *corev1.PersistentVolume
}

// driverVolume finds the pod's first claim of the driver: bound to a
// volume of the driver, or not bound yet with a storage class whose
// provisioner is the driver. Claims of other drivers, bound or not, are
// ignored.
func driverVolume(ctx context.Context, driver string, pod *corev1.Pod, l Lookup) (volume, error) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := l.Claim(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		if err != nil || pvc == nil {
			if err != nil {
				return volume{}, err
			}
			continue
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := l.Volume(ctx, pvc.Spec.VolumeName)
			if err != nil {
				return volume{}, err
			}
			if pv != nil && pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driver {
				return volume{selected: true, pv: pv}, nil
			}
			continue
		}
		if pvc.Spec.StorageClassName != nil {
			sc, err := l.StorageClass(ctx, *pvc.Spec.StorageClassName)
			if err != nil {
				return volume{}, err
			}
			if sc != nil && sc.Provisioner == driver {
				return volume{selected: true}, nil
			}
		}
	}
	return volume{}, nil
}

// Companion is the companion a workload pod needs.
type Companion struct {
	// Requests of the companion (cpu and memory); empty when the profile
	// gives no size for this pod.
	Requests corev1.ResourceList
	// ShareKey is the label value that workloads sharing one companion per
	// node have in common (a hash, LabelCompanionShareKey).
	ShareKey string
}

// For returns the companion of a pod profile p selects: its requests (the
// profile's fixed ones, overridden by the volume attributes the profile
// names when the bound volume has them) and its share key. A volume that
// is not bound yet gives the pod a key of its own: it shares with nobody.
func For(ctx context.Context, p *v1alpha1.CompanionProfile, pod *corev1.Pod, l Lookup) (Companion, error) {
	var v volume
	if p.Spec.Workloads.CSIDriver != "" {
		var err error
		if v, err = driverVolume(ctx, p.Spec.Workloads.CSIDriver, pod, l); err != nil {
			return Companion{}, err
		}
	}
	c := Companion{Requests: corev1.ResourceList{}}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := p.Spec.Companion.Resources[name]; ok && q.Sign() > 0 {
			c.Requests[name] = q
		}
	}
	if a := p.Spec.Companion.FromVolumeAttributes; a != nil && v.pv != nil {
		attrs := v.pv.Spec.CSI.VolumeAttributes
		setFrom(c.Requests, corev1.ResourceCPU, attrs[a.CPU])
		setFrom(c.Requests, corev1.ResourceMemory, attrs[a.Memory])
	}
	c.ShareKey = shareKey(p, pod, v.pv)
	return c, nil
}

// setFrom sets a request from a volume attribute when it is a positive
// quantity; anything else keeps the profile's default.
func setFrom(rl corev1.ResourceList, name corev1.ResourceName, attr string) {
	if attr == "" {
		return
	}
	if q, err := quantity.Parse(attr); err == nil && q.Sign() > 0 {
		rl[name] = q
	}
}

// shareKey hashes what makes workloads share a companion: the profile and
// the volume (and its mount options), or the pod itself.
func shareKey(p *v1alpha1.CompanionProfile, pod *corev1.Pod, pv *corev1.PersistentVolume) string {
	parts := []string{p.Name}
	switch {
	case pv == nil || p.Spec.ShareBy == v1alpha1.ShareByNone || (p.Spec.ShareBy == "" && p.Spec.Workloads.CSIDriver == ""):
		parts = append(parts, "pod", string(pod.UID), pod.Namespace, pod.Name)
	case p.Spec.ShareBy == v1alpha1.ShareByVolumeAndMountOptions:
		opts := slices.Clone(pv.Spec.MountOptions)
		slices.Sort(opts)
		parts = append(parts, "volume", pv.Name, strings.Join(opts, ","))
	default:
		parts = append(parts, "volume", pv.Name)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:20])
}

// Recognizes reports whether pod is a companion of profile p: in the
// profile's namespace and matching its selector. A profile that is not
// valid (Validate) recognises none, and berth's own pods are never
// companions.
func Recognizes(p *v1alpha1.CompanionProfile, pod *corev1.Pod) bool {
	if isBerths(pod) || Validate(p) != nil || pod.Namespace != p.Spec.Recognize.Namespace {
		return false
	}
	ok, err := matches(&p.Spec.Recognize.Selector, labels.Set(pod.Labels))
	return ok && err == nil
}

// RecognizedByAny reports whether some profile recognises pod.
func RecognizedByAny(profiles []v1alpha1.CompanionProfile, pod *corev1.Pod) bool {
	for i := range profiles {
		if Recognizes(&profiles[i], pod) {
			return true
		}
	}
	return false
}

// isBerths: one of berth's own pods (placeholders).
func isBerths(pod *corev1.Pod) bool {
	_, berth := pod.Labels[v1alpha1.LabelHeadroomRole]
	return berth
}

// UngateAfter is how long berth may hold a workload's gate.
func UngateAfter(p *v1alpha1.CompanionProfile) metav1.Duration {
	if p.Spec.UngateAfter != nil && p.Spec.UngateAfter.Duration > 0 {
		return *p.Spec.UngateAfter
	}
	return metav1.Duration{Duration: defaultUngateAfter}
}

// defaultUngateAfter is UngateAfter when the profile does not set it.
const defaultUngateAfter = 30 * time.Second

// Gated reports whether the pod carries berth's companion gate.
func Gated(pod *corev1.Pod) bool { return hasGate(pod, v1alpha1.SchedulingGateCompanion) }

func hasGate(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == name })
}

// Selecting returns the first profile, by name, that selects pod, or nil.
// A profile that is not valid selects nothing (Validate), so one broken
// profile never keeps the others from gating their pods.
func Selecting(ctx context.Context, profiles []v1alpha1.CompanionProfile, pod *corev1.Pod, l Lookup) (*v1alpha1.CompanionProfile, error) {
	slices.SortFunc(profiles, func(a, b v1alpha1.CompanionProfile) int { return strings.Compare(a.Name, b.Name) })
	for i := range profiles {
		ok, err := Selects(ctx, &profiles[i], pod, l)
		if err != nil || ok {
			if ok {
				return &profiles[i], err
			}
			return nil, err
		}
	}
	return nil, nil
}

// PinnedNode is the one node a pod may run on by its required node
// affinity on metadata.name, as CSI drivers pin their mount pods, or "".
func PinnedNode(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, f := range terms[0].MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
			return f.Values[0]
		}
	}
	return ""
}

// HandoverGated reports whether berth's hand-over gate is on a companion.
func HandoverGated(pod *corev1.Pod) bool {
	return hasGate(pod, v1alpha1.SchedulingGateCompanionHandover)
}

// PlaceholderLabels returns the labels that select berth's companion
// placeholders (in v1alpha1.SystemNamespace); a new map each call.
func PlaceholderLabels() map[string]string {
	return map[string]string{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}
}

// HoldsRoomOn reports whether ph, one of berth's companion placeholders,
// holds room on node for profile's companions and is not being deleted.
func HoldsRoomOn(ph *corev1.Pod, node, profile string) bool {
	return ph.DeletionTimestamp == nil && ph.Annotations[v1alpha1.AnnotationCompanionNode] == node &&
		ph.Annotations[v1alpha1.AnnotationCompanionProfile] == profile
}
