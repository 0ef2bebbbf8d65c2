// Package daemonset says which DaemonSets run a pod on a node and what
// those pods request: the overhead a node of a template carries before any
// other pod lands on it. PURE: values in, values out.
package daemonset

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// AnnotationRoomKept marks a node object a caller built with the room of
// its DaemonSets' pods already taken off its allocatable (Remaining: a
// launched instance whose Node has not registered, a suspended standby
// node offered for resume): the planner keeps no room on it again. It is
// never written to the API server.
const AnnotationRoomKept = "berth.dev/daemonset-room-kept"

// Pod is a DaemonSet's pod template, ready to test against nodes.
type Pod struct {
	// DaemonSet names the DaemonSet.
	DaemonSet types.NamespacedName
	pod       *corev1.Pod
	affinity  nodeaffinity.RequiredNodeAffinity
	// Requests are what one pod of the DaemonSet requests.
	Requests snapshot.Resources
	// List is the same as a ResourceList.
	List corev1.ResourceList
	// Ports are the host ports one pod of the DaemonSet holds.
	Ports []snapshot.HostPort
}

// tolerations are the tolerations the DaemonSet controller adds to every
// DaemonSet pod.
var tolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// Pods are the DaemonSets' pods as the DaemonSet controller makes them
// and the API server admits them (their template, in their namespace,
// with its tolerations and a Pod's defaults: a container that only
// limits a resource requests it, and a host-network container's ports
// are host ports).
func Pods(dss []*appsv1.DaemonSet) []Pod {
	out := make([]Pod, 0, len(dss))
	for _, ds := range dss {
		pod := &corev1.Pod{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: *ds.Spec.Template.Spec.DeepCopy()}
		pod.Namespace = ds.Namespace
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, tolerations...)
		podutil.ApplyDefaults(&pod.Spec)
		list := resource.PodRequests(pod, resource.PodResourcesOptions{})
		out = append(out, Pod{
			DaemonSet: types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name},
			pod:       pod,
			affinity:  nodeaffinity.GetRequiredNodeAffinity(pod),
			Requests:  snapshot.FromList(list),
			List:      list,
			Ports:     snapshot.HostPortsOf(pod),
		})
	}
	return out
}

// RunsOn reports whether the DaemonSet would run a pod on the node: its
// node selector and required affinity match the node as it is once up
// (asUp), and it tolerates the node's NoSchedule and NoExecute taints.
func (d Pod) RunsOn(node *corev1.Node) bool {
	if ok, _ := d.affinity.Match(asUp(node)); !ok {
		return false
	}
	_, untolerated := snapshot.UntoleratedTaint(node.Spec.Taints, d.pod.Spec.Tolerations)
	return !untolerated
}

// asUp is the node as it is once berth has seen it Ready: a node of a
// berth group (planned, launching or booting) carries
// berth.dev/initialized then, which agents that wait for a node to be up
// select, as Karpenter's karpenter.sh/initialized.
func asUp(node *corev1.Node) *corev1.Node {
	if node.Labels[v1alpha1.LabelNodeGroup] == "" || node.Labels[v1alpha1.LabelInitialized] == "true" {
		return node
	}
	up := *node
	up.Labels = maps.Clone(node.Labels)
	up.Labels[v1alpha1.LabelInitialized] = "true"
	return &up
}

// Remaining is what allocatable leaves once the DaemonSets that run on
// the node have their pods there: less their requests (never below zero)
// and one pod each. allocatable is not changed.
func Remaining(allocatable corev1.ResourceList, dss []Pod, node *corev1.Node) corev1.ResourceList {
	used, pods := corev1.ResourceList{}, int64(0)
	for _, d := range dss {
		if !d.RunsOn(node) {
			continue
		}
		pods++
		for name, q := range d.List {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	if pods == 0 {
		return allocatable
	}
	used[corev1.ResourcePods] = *apiresource.NewQuantity(pods, apiresource.DecimalSI)
	out := make(corev1.ResourceList, len(allocatable))
	for name, q := range allocatable {
		q = q.DeepCopy()
		if u, ok := used[name]; ok {
			q.Sub(u)
			if q.Sign() < 0 {
				q = apiresource.Quantity{}
			}
		}
		out[name] = q
	}
	return out
}
