package trace

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// Recordable reports whether a live pod belongs in a trace: not a
// DaemonSet's pod (the simulator runs the DaemonSets it is given), not a
// static pod, not berth's own headroom pod (the policy makes those).
func Recordable(p *corev1.Pod) bool {
	_, headroom := p.Labels[v1alpha1.LabelHeadroom]
	return !podutil.IsDaemonSetPod(p) && !podutil.IsMirror(p) && !headroom
}

// FromPod keeps what scheduling reads of a live pod: its labels, owner,
// and the spec's requests, selectors, affinities, tolerations, spread,
// priority, overhead and resource claims (images, commands, volumes and
// the rest are dropped).
func FromPod(p *corev1.Pod) *Pod {
	out := &Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.Workload = p.Namespace + "/" + ref.Name
	}
	s := &p.Spec
	out.Spec = corev1.PodSpec{
		NodeSelector:              s.NodeSelector,
		Affinity:                  s.Affinity,
		Tolerations:               s.Tolerations,
		TopologySpreadConstraints: s.TopologySpreadConstraints,
		Priority:                  s.Priority,
		PriorityClassName:         s.PriorityClassName,
		PreemptionPolicy:          s.PreemptionPolicy,
		Overhead:                  s.Overhead,
		Resources:                 s.Resources,
		ResourceClaims:            s.ResourceClaims,
		SchedulerName:             s.SchedulerName,
		RuntimeClassName:          s.RuntimeClassName,
	}
	keep := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, 0, len(cs))
		for _, c := range cs {
			out = append(out, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy, Ports: hostPorts(c.Ports)})
		}
		return out
	}
	out.Spec.Containers = keep(s.Containers)
	if len(s.InitContainers) > 0 {
		out.Spec.InitContainers = keep(s.InitContainers)
	}
	return out
}

// hostPorts keeps the ports that bind the node's (a scheduling filter).
func hostPorts(ports []corev1.ContainerPort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range ports {
		if p.HostPort != 0 {
			out = append(out, p)
		}
	}
	return out
}
