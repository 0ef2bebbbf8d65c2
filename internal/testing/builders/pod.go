package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodOption changes a Pod under construction.
type PodOption func(*corev1.Pod)

// Pod returns a pod in namespace "default" with one pause container and no
// requests; options add requests, labels and constraints.
func Pod(name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Namespace sets the pod's namespace.
func Namespace(ns string) PodOption { return func(p *corev1.Pod) { p.Namespace = ns } }

// NoUID clears the UID (for objects sent to an API server).
func NoUID() PodOption { return func(p *corev1.Pod) { p.UID = "" } }

func request(p *corev1.Pod, name corev1.ResourceName, q string) {
	c := &p.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(q)
}

// CPU sets the cpu request of the first container.
func CPU(q string) PodOption { return func(p *corev1.Pod) { request(p, corev1.ResourceCPU, q) } }

// Memory sets the memory request of the first container.
func Memory(q string) PodOption { return func(p *corev1.Pod) { request(p, corev1.ResourceMemory, q) } }

// Request sets any request of the first container.
func Request(name corev1.ResourceName, q string) PodOption {
	return func(p *corev1.Pod) { request(p, name, q) }
}

// InitContainer adds an init container with the given requests.
func InitContainer(name string, requests corev1.ResourceList) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: requests}})
	}
}

// SidecarContainer adds a restartable init container (restartPolicy Always)
// with the given requests.
func SidecarContainer(name string, requests corev1.ResourceList) PodOption {
	always := corev1.ContainerRestartPolicyAlways
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: requests}})
	}
}

// Overhead sets the pod overhead.
func Overhead(rl corev1.ResourceList) PodOption { return func(p *corev1.Pod) { p.Spec.Overhead = rl } }

// Labels adds labels.
func Labels(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// NodeSelector adds nodeSelector entries.
func NodeSelector(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

// NodeName binds the pod to a node.
func NodeName(n string) PodOption { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

// Phase sets the pod phase.
func Phase(ph corev1.PodPhase) PodOption { return func(p *corev1.Pod) { p.Status.Phase = ph } }

// Tolerate adds a toleration with operator Equal (or Exists when value is
// empty) for the given effect (all effects when empty).
func Tolerate(key, value string, effect corev1.TaintEffect) PodOption {
	return func(p *corev1.Pod) {
		t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect}
		if value == "" {
			t.Operator = corev1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	}
}

// RequireNodeAffinity adds a required node selector term (terms are ORed).
func RequireNodeAffinity(term corev1.NodeSelectorTerm) PodOption {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.NodeAffinity == nil {
			p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := p.Spec.Affinity.NodeAffinity
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		r := na.RequiredDuringSchedulingIgnoredDuringExecution
		r.NodeSelectorTerms = append(r.NodeSelectorTerms, term)
	}
}

// Expr is a node selector requirement.
func Expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// Term is a node selector term of match expressions.
func Term(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

// PodAffinity adds a required pod affinity term.
func PodAffinity(term corev1.PodAffinityTerm) PodOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
	}
}

// PodAntiAffinity adds a required pod anti-affinity term.
func PodAntiAffinity(term corev1.PodAffinityTerm) PodOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
	}
}

// AffinityTerm is a pod affinity term over matchLabels and a topology key.
func AffinityTerm(topologyKey string, matchLabels ...string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: topologyKey, LabelSelector: labelSelector(matchLabels...)}
}

func labelSelector(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// Spread adds a DoNotSchedule topology spread constraint over matchLabels.
func Spread(topologyKey string, maxSkew int32, matchLabels ...string) PodOption {
	return SpreadConstraint(corev1.TopologySpreadConstraint{
		TopologyKey: topologyKey, MaxSkew: maxSkew, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: labelSelector(matchLabels...),
	})
}

// SpreadConstraint adds a topology spread constraint as given.
func SpreadConstraint(c corev1.TopologySpreadConstraint) PodOption {
	return func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c) }
}

// HostPort adds a host port to the first container.
func HostPort(port int32, protocol corev1.Protocol) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: protocol})
	}
}

// Priority sets the pod priority.
func Priority(v int32) PodOption { return func(p *corev1.Pod) { p.Spec.Priority = &v } }

// OwnedBy sets a controller owner reference.
func OwnedBy(kind, name string) PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes})
	}
}

// Annotation adds an annotation.
func Annotation(key, value string) PodOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[key] = value
	}
}

// EmptyDir adds an emptyDir volume on the node's disk.
func EmptyDir(name string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
}
