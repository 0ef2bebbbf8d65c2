package tenant

import (
	"encoding/json"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// containerName is the name of the tenant's container.
const containerName = "tenant"

// annotationConfigHash on the pod template is a hash of the tenant's
// configuration: a change of configuration changes the template and so
// replaces the pod, which reads its configuration as environment at start.
const annotationConfigHash = "berth.dev/config-hash"

// objectLabels are the labels of every object berth creates for t.
func objectLabels(t *v1alpha1.Tenant) map[string]string {
	return map[string]string{v1alpha1.LabelTenant: t.Name}
}

// configMapName is the name of the tenant's ConfigMap.
func configMapName(t *v1alpha1.Tenant) string { return t.Name + "-config" }

// Scheduling is where a NodeGroup's nodes accept pods: its template's
// labels and berth's node group label as a node selector, its template's
// taints as tolerations. Both come from the group, so a tenant's pod and
// its group can never disagree.
func Scheduling(ng *v1alpha1.NodeGroup) (map[string]string, []corev1.Toleration) {
	sel := make(map[string]string, len(ng.Spec.Template.Labels)+1)
	for k, v := range ng.Spec.Template.Labels {
		sel[k] = string(v)
	}
	sel[v1alpha1.LabelNodeGroup] = ng.Name
	tols := make([]corev1.Toleration, 0, len(ng.Spec.Template.Taints))
	for _, taint := range ng.Spec.Template.Taints {
		tols = append(tols, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value,
			Effect: corev1.TaintEffect(taint.Effect)})
	}
	return sel, tols
}

// dedicatedAntiAffinity keeps a dedicated tenant's pod off every node that
// runs another tenant's pod, of any type in any namespace. The rule is
// symmetric in kube-scheduler and in berth's planner: no tenant pod is
// placed next to a dedicated one either.
func dedicatedAntiAffinity() *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: v1alpha1.LabelTenant, Operator: metav1.LabelSelectorOpExists}}},
			NamespaceSelector: &metav1.LabelSelector{}, // all namespaces
			TopologyKey:       v1alpha1.LabelHostname,
		}},
	}}
}

// Config is the tenant's configuration: its type's values, overridden by
// its own.
func Config(tt *v1alpha1.TenantType, t *v1alpha1.Tenant) map[string]string {
	out := make(map[string]string, len(tt.Spec.Config)+len(t.Spec.Config))
	for k, v := range tt.Spec.Config {
		out[k] = string(v)
	}
	for k, v := range t.Spec.Config {
		out[k] = string(v)
	}
	return out
}

func namespace(t *v1alpha1.Tenant) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: t.TenantNamespace(), Labels: objectLabels(t)},
	}
}

func configMap(t *v1alpha1.Tenant, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(t), Namespace: t.TenantNamespace(), Labels: objectLabels(t)},
		Data:       data,
	}
}

// deployment is the tenant's Deployment: one pod of the type's template on
// a node of its group, replaced (not rolled) when it changes, so that a
// dedicated tenant never needs a second node for its new pod.
func deployment(t *v1alpha1.Tenant, tt *v1alpha1.TenantType, ng *v1alpha1.NodeGroup, config map[string]string) *appsv1.Deployment {
	podLabels := objectLabels(t)
	podLabels[v1alpha1.LabelTenantType] = tt.Name
	sel, tols := Scheduling(ng)
	spec := tt.Spec.Template
	c := corev1.Container{
		Name: containerName, Image: spec.Image, Command: spec.Command, Args: spec.Args,
		Resources: corev1.ResourceRequirements{Requests: spec.Resources.Requests, Limits: spec.Resources.Limits},
		EnvFrom:   []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(t)}}}},
	}
	for _, p := range spec.Ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: p.Protocol})
	}
	for _, e := range spec.Env {
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	for _, s := range t.Spec.SecretRefs {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.Name}}}) // required: the pod waits for it
	}
	pod := corev1.PodSpec{Containers: []corev1.Container{c}, NodeSelector: sel, Tolerations: tols,
		AutomountServiceAccountToken: ptr.To(false)}
	if tt.Spec.Dedicated() {
		pod.Affinity = dedicatedAntiAffinity()
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.TenantNamespace(), Labels: objectLabels(t)},
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To[int32](1),
			RevisionHistoryLimit: ptr.To[int32](2),
			Selector:             &metav1.LabelSelector{MatchLabels: objectLabels(t)},
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: map[string]string{annotationConfigHash: hash(config)}},
				Spec:       pod,
			},
		},
	}
}

// service is the tenant's Service, nil when its type has none.
func service(t *v1alpha1.Tenant, tt *v1alpha1.TenantType) *corev1.Service {
	s := tt.Spec.Service
	if s == nil {
		return nil
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.TenantNamespace(), Labels: objectLabels(t)},
		Spec:       corev1.ServiceSpec{Type: s.Type, Selector: objectLabels(t)},
	}
	for _, p := range s.Ports {
		target := p.TargetPort
		if target == 0 {
			target = p.Port
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.Port, Protocol: p.Protocol,
			TargetPort: intstr.FromInt32(target)})
	}
	return svc
}

// hash hashes the configuration in key order.
func hash(config map[string]string) string {
	keys := slices.Sorted(maps.Keys(config))
	pairs := make([][2]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, [2]string{k, config[k]})
	}
	data, _ := json.Marshal(pairs)
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}
