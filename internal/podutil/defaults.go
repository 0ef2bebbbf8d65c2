package podutil

import corev1 "k8s.io/api/core/v1"

// ApplyDefaults gives a pod spec the parts of the API server's Pod
// defaulting that the planner reads, in place: a container (and the pod,
// for pod-level resources) requests what it only limits, and a container
// on the host network holds its container ports as host ports. The API
// server does this to a Pod, not to the template of a DaemonSet or a
// hand-written `berth plan` input, whose pods will be admitted so.
func ApplyDefaults(spec *corev1.PodSpec) {
	fill := func(r *corev1.ResourceRequirements) {
		for name, q := range r.Limits {
			if _, ok := r.Requests[name]; ok {
				continue
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			fill(&cs[i].Resources)
			if !spec.HostNetwork {
				continue
			}
			for j := range cs[i].Ports {
				if cs[i].Ports[j].HostPort == 0 {
					cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
				}
			}
		}
	}
	if spec.Resources != nil {
		fill(spec.Resources)
	}
}
