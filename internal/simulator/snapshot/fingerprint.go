package snapshot

import (
	"encoding/binary"
	"hash/maphash"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// fingerprint hashes the fields of a pod that its Class is derived from, so
// that pods with equal fingerprints share a class. Names, UIDs, images and
// everything else the filters do not read are left out. The protobuf
// encodings of the API sub-structs are deterministic (maps are sorted).
type fingerprinter struct {
	seed maphash.Seed
	buf  []byte
	// claimID says what a pod's resource claim reference means (nil: the
	// reference as written).
	claimID func(*corev1.Pod, *corev1.PodResourceClaim) string
	// names and digits are scratch space for resources.
	names  []corev1.ResourceName
	digits []byte
}

func newFingerprinter() *fingerprinter {
	return &fingerprinter{seed: maphash.MakeSeed()}
}

type protoMarshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

func (f *fingerprinter) str(s string) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(s)))
	f.buf = append(f.buf, s...)
}

func (f *fingerprinter) proto(m protoMarshaler) {
	n := m.Size()
	f.buf = binary.AppendUvarint(f.buf, uint64(n))
	start := len(f.buf)
	f.buf = slices.Grow(f.buf, n)[:start+n]
	if _, err := m.MarshalToSizedBuffer(f.buf[start:]); err != nil {
		// Cannot happen for well-formed API structs; fall back to a
		// unique marker so the pod gets a class of its own.
		f.str("unmarshalable")
	}
}

func (f *fingerprinter) sortedMap(m map[string]string) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(m)))
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f.str(k)
		f.str(m[k])
	}
}

func (f *fingerprinter) containers(cs []corev1.Container, requests bool) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(cs)))
	for i := range cs {
		c := &cs[i]
		if requests {
			f.resources(&c.Resources)
		} else {
			f.claims(&c.Resources)
		}
		if c.RestartPolicy != nil {
			f.str(string(*c.RestartPolicy))
		} else {
			f.str("")
		}
		for j := range c.Ports {
			if c.Ports[j].HostPort > 0 {
				f.proto(&c.Ports[j])
			}
		}
		f.str("|")
	}
}

// statusResources writes what the kubelet reports of an in-place resize
// (the containers' and the pod's actuated and allocated requests, and
// whether the resize is infeasible): kube-scheduler counts them
// (RequestsOf).
func (f *fingerprinter) statusResources(pod *corev1.Pod) {
	for _, css := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range css {
			cs := &css[i]
			if cs.Resources == nil && len(cs.AllocatedResources) == 0 {
				continue
			}
			f.str(cs.Name)
			if cs.Resources != nil {
				f.resourceList(cs.Resources.Requests)
			}
			f.resourceList(cs.AllocatedResources)
		}
	}
	if pod.Status.Resources != nil || len(pod.Status.AllocatedResources) > 0 {
		f.str("pod") // a resize of pod-level resources
		if pod.Status.Resources != nil {
			f.resourceList(pod.Status.Resources.Requests)
		}
		f.resourceList(pod.Status.AllocatedResources)
	}
	if resource.IsPodResizeInfeasible(pod) {
		f.str("infeasible")
	}
}

// resources writes a container's limits, requests and claims. Quantities
// are written by value (canonical digits and exponent), not as text: the
// protobuf encoding formats every quantity anew, which was most of the
// cost of fingerprinting the pods of a large cluster.
func (f *fingerprinter) resources(r *corev1.ResourceRequirements) {
	f.resourceList(r.Limits)
	f.resourceList(r.Requests)
	f.claims(r)
}

// claims writes a container's resource claims.
func (f *fingerprinter) claims(r *corev1.ResourceRequirements) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(r.Claims)))
	for _, c := range r.Claims {
		f.str(c.Name)
		f.str(c.Request)
	}
}

func (f *fingerprinter) resourceList(l corev1.ResourceList) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(l)))
	if len(l) == 0 {
		return
	}
	names := f.names[:0]
	for k := range l {
		names = append(names, k)
	}
	slices.Sort(names)
	f.names = names
	for _, k := range names {
		q := l[k]
		f.str(string(k))
		var exp int32
		f.digits, exp = q.AsCanonicalBytes(f.digits[:0])
		f.buf = binary.AppendUvarint(f.buf, uint64(len(f.digits)))
		f.buf = append(f.buf, f.digits...)
		f.buf = binary.AppendVarint(f.buf, int64(exp))
	}
}

// sum returns the fingerprint of a pod. A placed pod's (one of the
// snapshot's bound pods) leaves its node name out: pods placed on
// different nodes share a class, and their classes never meet a pod to
// place (their kinds are told apart).
func (f *fingerprinter) sum(pod *corev1.Pod, placed bool) uint64 {
	f.write(pod, placed, true)
	return maphash.Bytes(f.seed, f.buf)
}

// constraints returns the fingerprint of a pending pod without its
// requests and limits (Snapshot.Constraints).
func (f *fingerprinter) constraints(pod *corev1.Pod) uint64 {
	f.write(pod, false, false)
	return maphash.Bytes(f.seed, f.buf)
}

// write writes the fields sum hashes to f.buf, the requests and limits
// (containers', pod-level resources and overhead) only when asked.
func (f *fingerprinter) write(pod *corev1.Pod, placed, requests bool) {
	f.buf = f.buf[:0]
	if placed {
		f.buf = append(f.buf, 'P')
	} else {
		f.buf = append(f.buf, 'U')
		f.str(pod.Spec.NodeName)
	}
	f.str(pod.Namespace)
	f.sortedMap(pod.Labels)
	f.str(pod.Annotations[v1alpha1.AnnotationCompanionRequests])
	if pod.DeletionTimestamp != nil {
		f.str("terminating")
	}
	if pod.Spec.Priority != nil {
		f.buf = binary.AppendVarint(f.buf, int64(*pod.Spec.Priority))
	}
	f.containers(pod.Spec.InitContainers, requests)
	f.containers(pod.Spec.Containers, requests)
	if requests {
		f.statusResources(pod)
	}
	if pod.Spec.Resources != nil && requests {
		f.proto(pod.Spec.Resources)
	}
	f.sortedMap(pod.Spec.NodeSelector)
	if pod.Spec.Affinity != nil {
		f.proto(pod.Spec.Affinity)
	}
	for i := range pod.Spec.Tolerations {
		f.proto(&pod.Spec.Tolerations[i])
	}
	f.str("|")
	for i := range pod.Spec.TopologySpreadConstraints {
		f.proto(&pod.Spec.TopologySpreadConstraints[i])
	}
	f.str("|")
	if len(pod.Spec.Overhead) > 0 && requests {
		names := make([]string, 0, len(pod.Spec.Overhead))
		for k := range pod.Spec.Overhead {
			names = append(names, string(k))
		}
		slices.Sort(names)
		for _, k := range names {
			q := pod.Spec.Overhead[corev1.ResourceName(k)]
			f.str(k)
			f.str(q.String())
		}
	}
	f.str("|")
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil {
			f.str(v.PersistentVolumeClaim.ClaimName)
		}
		if v.Ephemeral != nil {
			f.str(pod.Name + "-" + v.Name)
		}
	}
	f.str("|")
	for i := range pod.Spec.ResourceClaims {
		ref := &pod.Spec.ResourceClaims[i]
		f.str(ref.Name)
		if f.claimID != nil {
			f.str(f.claimID(pod, ref))
		}
	}
}
