package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// NodeOption changes a Node under construction.
type NodeOption func(*corev1.Node)

// Node returns a Ready node with the hostname label, 110 pods and the given
// cpu and memory as capacity and allocatable.
func Node(name, cpu, memory string, opts ...NodeOption) *corev1.Node {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity:    rl,
			Allocatable: rl.DeepCopy(),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// NodeLabels adds labels.
func NodeLabels(kv ...string) NodeOption {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// NodeTaint adds a taint.
func NodeTaint(key, value string, effect corev1.TaintEffect) NodeOption {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// NodeAllocatable sets one allocatable (and capacity) resource.
func NodeAllocatable(name corev1.ResourceName, q string) NodeOption {
	return func(n *corev1.Node) {
		n.Status.Allocatable[name] = resource.MustParse(q)
		n.Status.Capacity[name] = resource.MustParse(q)
	}
}

// Cordoned marks the node unschedulable.
func Cordoned() NodeOption { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

// KWOK annotates the node so that KWOK runs its pods.
func KWOK() NodeOption {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[v1alpha1.AnnotationKWOKNode] = v1alpha1.AnnotationKWOKNodeValue
	}
}

// NotReady clears the Ready condition, as on a node that is still booting
// (see Booting) or went down.
func NotReady() NodeOption {
	return func(n *corev1.Node) { n.Status.Conditions = nil }
}

// Booting makes the node one still coming up: not Ready, and never seen
// Ready (no initialized label). Apply it after LaunchedBy.
func Booting() NodeOption {
	return func(n *corev1.Node) {
		n.Status.Conditions = nil
		delete(n.Labels, v1alpha1.LabelInitialized)
	}
}

// LaunchedBy makes the node one berth launched for the group and saw
// Ready: the group label, berth's owner mark (the group's UID) and the
// initialized label.
func LaunchedBy(ng *v1alpha1.NodeGroup) NodeOption {
	return func(n *corev1.Node) {
		n.Labels[v1alpha1.LabelNodeGroup] = ng.Name
		n.Labels[v1alpha1.LabelInitialized] = "true"
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[v1alpha1.AnnotationLaunchedBy] = string(ng.UID)
	}
}

// NodeAnnotation adds an annotation.
func NodeAnnotation(key, value string) NodeOption {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	}
}
