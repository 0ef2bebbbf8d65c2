package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/resource"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/berth-dev/berth/internal/quantity"
)

// trimmer drops from every object the informer cache holds what berth
// never reads, before it is stored: managedFields everywhere, and from
// pods and nodes (the objects of which a cluster has thousands) what no
// planner, drain rule or controller looks at: a pod's container
// statuses (but what an in-place resize makes it request:
// resizeStatuses), its containers' commands, environment, probes, mounts and
// images, its volumes of secrets, config maps, projected tokens and the
// downward API, its ephemeral containers and kubectl's last-applied copy;
// a node's image list, addresses, versions and volumes (trimNode); a
// pod's addresses and its conditions but Ready and an unmet
// PodScheduled. On a large cluster the cache is most of the
// controller's memory. What stays: names, labels, annotations (but the
// last-applied copy), owners, every scheduling field (requests, limits,
// claims, ports, restart policies of sidecars, affinity, tolerations,
// spread, priority, overhead, scheduling gates), volumes a scheduler or a
// drain rule reads (claims, ephemeral, CSI, host paths, empty dirs) and
// the rest of the status. Patches are computed between two copies of a trimmed
// object, so they never send the missing fields; pods and nodes are never
// updated whole; a controller that copies a pod's spec into an object it
// writes (the CapacityBuffer's chunk template) reads the pod past the
// cache.
//
// It also bounds the quantities of pods, nodes, ResourceSlices and the pod
// templates of workloads and PodTemplates (quantity.Bound): one the API
// server stored with an exponent of millions of digits would make every
// comparison with it take seconds. Only quantities of more than 1,000
// digits change, to the number kube-scheduler reads from them.
//
// Then the parts pods and nodes have alike are shared (partShare; nil:
// not shared).
type trimmer struct{ parts *partShare }

func newTrimmer() *trimmer { return &trimmer{parts: newPartShare()} }

// trim is the cache's transform (see trimmer).
func (t *trimmer) trim(obj any) (any, error) {
	obj, err := crcache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		trimPod(o)
	case *corev1.Node:
		trimNode(o)
	}
	// Workloads and PodTemplates too: CapacityBuffers and DaemonSet
	// overhead read their pod templates' requests.
	quantity.BoundObject(obj)
	if t.parts != nil { // after bounding: shared parts are never changed
		switch o := obj.(type) {
		case *corev1.Pod:
			t.parts.sharePod(o)
		case *corev1.Node:
			t.parts.shareNode(o)
		}
	}
	return obj, nil
}

// trimNode drops from a node what berth never reads: its image list,
// addresses, the kubelet's and runtime's versions (NodeInfo), its daemon
// endpoints, runtime handlers, features and config, the volumes attached
// and in use, and kubectl's last-applied copy.
func trimNode(n *corev1.Node) {
	delete(n.Annotations, corev1.LastAppliedConfigAnnotation)
	st := &n.Status
	st.Images, st.Addresses, st.NodeInfo, st.DaemonEndpoints = nil, nil, corev1.NodeSystemInfo{}, corev1.NodeDaemonEndpoints{}
	st.VolumesAttached, st.VolumesInUse, st.RuntimeHandlers, st.Features, st.Config = nil, nil, nil, nil, nil
}

func trimPod(p *corev1.Pod) {
	delete(p.Annotations, corev1.LastAppliedConfigAnnotation)
	infeasible := resource.IsPodResizeInfeasible(p)
	p.Status.ContainerStatuses = resizeStatuses(p.Spec.Containers, p.Status.ContainerStatuses, infeasible)
	p.Status.InitContainerStatuses = resizeStatuses(p.Spec.InitContainers, p.Status.InitContainerStatuses, infeasible)
	p.Status.EphemeralContainerStatuses = nil
	p.Status.HostIP, p.Status.HostIPs, p.Status.PodIP, p.Status.PodIPs = "", nil, "", nil
	// A copy of what is kept: the decoded slice has room for 8 (120 bytes
	// each), which would stay allocated with the pod.
	p.Status.Conditions = slices.Clone(slices.DeleteFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return !keptCondition(&c)
	}))
	if len(p.Status.Conditions) == 0 {
		p.Status.Conditions = nil
	}
	p.Spec.EphemeralContainers = nil
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			cs[i] = corev1.Container{Name: cs[i].Name, Resources: cs[i].Resources, Ports: cs[i].Ports,
				RestartPolicy: cs[i].RestartPolicy, ResizePolicy: cs[i].ResizePolicy}
		}
	}
	vols := p.Spec.Volumes[:0]
	for _, v := range p.Spec.Volumes {
		if v.Secret == nil && v.ConfigMap == nil && v.Projected == nil && v.DownwardAPI == nil {
			vols = append(vols, v)
		}
	}
	clear(p.Spec.Volumes[len(vols):])
	p.Spec.Volumes = vols
}

// keptCondition reports whether the cache keeps a pod condition: Ready
// (whether a pod is ready and since when), PodScheduled while it is not
// True (why the scheduler found no node: the provisioner, node reserve
// and tenant status read it), and an infeasible resize (what the pod
// counts as requesting, snapshot.RequestsOf). PodScheduled=True, on every
// bound pod, is read by nothing and would cost 120 bytes a pod.
func keptCondition(c *corev1.PodCondition) bool {
	return c.Type == corev1.PodReady || (c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue) ||
		(c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible)
}

// resizeStatuses keeps of a pod's container statuses what kube-scheduler
// counts of an in-place resize (snapshot.RequestsOf): the name, actuated
// requests and allocated resources of each container that the kubelet
// reports above its spec's requests (a resize pending or in progress), or
// of every container reported while the resize is infeasible. Nil for
// every pod not being resized, which is almost all.
func resizeStatuses(specs []corev1.Container, css []corev1.ContainerStatus, infeasible bool) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range css {
		cs := &css[i]
		var actuated corev1.ResourceList
		if cs.Resources != nil {
			actuated = cs.Resources.Requests
		}
		var spec corev1.ResourceList
		if j := slices.IndexFunc(specs, func(c corev1.Container) bool { return c.Name == cs.Name }); j >= 0 {
			spec = specs[j].Resources.Requests
		}
		reported := len(actuated) > 0 || len(cs.AllocatedResources) > 0
		if !reported || !infeasible && !above(actuated, spec) && !above(cs.AllocatedResources, spec) {
			continue
		}
		kept := corev1.ContainerStatus{Name: cs.Name, AllocatedResources: cs.AllocatedResources}
		if len(actuated) > 0 { // none reported: kube-scheduler counts the spec and the allocated alike
			kept.Resources = &corev1.ResourceRequirements{Requests: actuated}
		}
		out = append(out, kept)
	}
	return out
}

// above reports whether a list asks for more of some resource than spec.
func above(list, spec corev1.ResourceList) bool {
	for name, q := range list {
		if s, ok := spec[name]; !ok && !q.IsZero() || ok && q.Cmp(s) > 0 {
			return true
		}
	}
	return false
}

var _ cache.TransformFunc = newTrimmer().trim
