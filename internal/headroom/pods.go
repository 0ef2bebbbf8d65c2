package headroom

import (
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// PauseImage is the image of placeholder and reserve pods.
const PauseImage = "registry.k8s.io/pause:3.10"

// Roles of the pods berth runs for a Headroom (LabelHeadroomRole).
const (
	RolePlaceholder = "placeholder"
	RoleNodeReserve = "node-reserve"
)

// WithPauseImage runs the pause containers of a placeholder or reserve
// pod spec in image (a mirror of PauseImage for clusters that cannot pull
// from registry.k8s.io); "" keeps PauseImage.
func WithPauseImage(spec *corev1.PodSpec, image string) {
	if image == "" {
		return
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == "pause" {
			spec.Containers[i].Image = image
		}
	}
}

// pauseContainer is the one container of placeholder and reserve pods, as
// the restricted Pod Security profile wants it (berth-system enforces it):
// non-root, no privilege escalation, no capabilities, RuntimeDefault
// seccomp.
func pauseContainer(requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{
		Name: "pause", Image: PauseImage,
		Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true), // the pause image runs as 65535; no user of its own, so that OpenShift's restricted SCC can assign one
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// fixedLimits are the limits the API server requires of a container
// that requests a resource it cannot overcommit: an extended resource (a
// domain-qualified name outside kubernetes.io, as nvidia.com/gpu) or
// hugepages, each limited to its request. Nil when there is none (cpu,
// memory and ephemeral storage are left without limits).
func fixedLimits(requests corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range requests {
		if overcommittable(name) {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[name] = q.DeepCopy()
	}
	return out
}

// overcommittable reports whether requests of a resource may go without a
// limit: native resources (no domain, or kubernetes.io's) but hugepages,
// as the API server's validation says.
func overcommittable(name corev1.ResourceName) bool {
	native := !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
	return native && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func resourceMilli(v int64) *resource.Quantity {
	return resource.NewMilliQuantity(v, resource.DecimalSI)
}
func resourceBytes(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.BinarySI) }

// unitSpec is the pod spec of one unit: its requests, its tolerations plus
// the scope groups' taints, its node selector, and node affinity to the
// scope's node groups.
func unitSpec(r Resolved, priority int32) corev1.PodSpec {
	spec := corev1.PodSpec{
		Containers:   []corev1.Container{pauseContainer(r.Shape.Resources.DeepCopy(), fixedLimits(r.Shape.Resources))},
		Tolerations:  append([]corev1.Toleration(nil), r.Shape.Tolerations...),
		NodeSelector: maps.Clone(r.Shape.NodeSelector),
		Priority:     &priority,
	}
	if len(r.Groups) > 0 {
		for _, g := range r.Groups {
			for _, t := range g.Spec.Template.Taints {
				spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
					Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
			}
		}
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.LabelNodeGroup, Operator: corev1.NodeSelectorOpIn, Values: r.GroupNames()}},
			}}},
		}}
	}
	return spec
}

// VirtualPods returns the units of a headroom as pods that exist only in
// berth's plans: lowest priority (placed after every real pod), in berth's
// namespace, constrained to the scope.
func VirtualPods(h *v1alpha1.Headroom, r Resolved) []*corev1.Pod {
	// The count may come from status (the provisioner reads it there):
	// bound it again rather than trust it.
	count, _ := clampUnits(float64(r.Count))
	out := make([]*corev1.Pod, 0, r.Total())
	specs := make([]corev1.PodSpec, 0, 1+len(r.Learned))
	counts := make([]int32, 0, 1+len(r.Learned))
	specs, counts = append(specs, unitSpec(r, v1alpha1.PriorityHeadroom)), append(counts, count)
	for _, l := range r.Learned {
		shape := r
		shape.Shape = v1alpha1.UnitShape{Resources: l.Resources, Tolerations: r.Shape.Tolerations, NodeSelector: r.Shape.NodeSelector}
		specs, counts = append(specs, unitSpec(shape, v1alpha1.PriorityHeadroom)), append(counts, l.Count)
	}
	i := 0
	for k, spec := range specs {
		for range counts[k] {
			if int32(i) >= MaxUnits {
				return out
			}
			out = append(out, virtualPod(h, i, &spec))
			i++
		}
	}
	return out
}

// virtualPod is the i-th virtual unit of a Headroom.
func virtualPod(h *v1alpha1.Headroom, i int, spec *corev1.PodSpec) *corev1.Pod {
	name := fmt.Sprintf("headroom-%s-%d", h.Name, i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: v1alpha1.SystemNamespace, UID: types.UID("virtual-" + name),
			Labels:      map[string]string{v1alpha1.LabelHeadroom: h.Name},
			Annotations: map[string]string{v1alpha1.AnnotationVirtual: "true"},
		},
		Spec:   *spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// PlaceholderTemplate is the pod template of a headroom's placeholder
// pods: pause containers of the berth-headroom PriorityClass that any real
// pod preempts, gone at once when preempted.
func PlaceholderTemplate(h *v1alpha1.Headroom, r Resolved) corev1.PodTemplateSpec {
	spec := unitSpec(r, v1alpha1.PriorityHeadroom)
	spec.Priority = nil // set by admission from the class
	spec.PriorityClassName = v1alpha1.PriorityClassHeadroom
	spec.TerminationGracePeriodSeconds = new(int64)
	never := corev1.PreemptNever
	spec.PreemptionPolicy = &never
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: PlaceholderLabels(h)},
		Spec:       spec,
	}
}

// PlaceholderLabels select a headroom's placeholder pods.
func PlaceholderLabels(h *v1alpha1.Headroom) map[string]string {
	return map[string]string{v1alpha1.LabelHeadroom: h.Name, v1alpha1.LabelHeadroomRole: RolePlaceholder}
}

// NodeReserveLabels select a headroom's per-node reserve pods.
func NodeReserveLabels(h *v1alpha1.Headroom) map[string]string {
	return map[string]string{v1alpha1.LabelHeadroom: h.Name, v1alpha1.LabelHeadroomRole: RoleNodeReserve}
}

// NodeReserveName is the name of a headroom's per-node reserve DaemonSet.
func NodeReserveName(h *v1alpha1.Headroom) string { return "node-reserve-" + h.Name }

// NodeReserveDaemonSet is the DaemonSet that holds a slice of every selected
// node: pause pods of the berth-node-reserve PriorityClass, which ordinary
// pods cannot preempt and berth-burst-critical pods can. A change of the
// slice rolls out surging (NodeReserveUpdate): a node's old reserve pod
// goes only once its new one runs.
func NodeReserveDaemonSet(h *v1alpha1.Headroom) *appsv1.DaemonSet {
	pn := h.Spec.PerNode
	labels := NodeReserveLabels(h)
	grace := int64(0)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: NodeReserveName(h), Namespace: v1alpha1.SystemNamespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: NodeReserveUpdate(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:             v1alpha1.PriorityClassNodeReserve,
					TerminationGracePeriodSeconds: &grace,
					NodeSelector:                  maps.Clone(pn.NodeSelector),
					Tolerations:                   append([]corev1.Toleration(nil), pn.Tolerations...),
					Containers:                    []corev1.Container{pauseContainer(pn.Resources.DeepCopy(), pn.Resources.DeepCopy())},
				},
			},
		},
	}
}

// NodeReserveUpdate is how a per-node reserve's change rolls out: the new
// reserve pod starts beside the old one on every node at once, and the
// old one goes once the new one is ready. Its pods never preempt
// (preemptionPolicy Never): deleted first, as the default rolling update
// does, a node's slice was lost whenever the new pod found no room (a
// larger slice on a full node, or a pending pod that took the room in
// between), and the rollout stopped there. Surging, such a node keeps its
// old slice, and, every node surging at once, holds no other node's
// rollout back (with a part of the nodes at a time, full nodes used the
// whole allowance and the rollout stopped everywhere).
func NodeReserveUpdate() appsv1.DaemonSetUpdateStrategy {
	surge, unavailable := intstr.FromString("100%"), intstr.FromInt32(0)
	return appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: &surge, MaxUnavailable: &unavailable}}
}
