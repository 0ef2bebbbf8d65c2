package clusterapi

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/quantity"
)

// Annotations on a MachineDeployment, MachineSet or MachinePool that berth
// reads exactly as Cluster Autoscaler's clusterapi provider does, so that
// objects prepared for Cluster Autoscaler work unchanged.
const (
	// AnnotationMinSize is the smallest number of replicas the autoscaler
	// may leave.
	AnnotationMinSize = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	// AnnotationMaxSize is the largest number of replicas the autoscaler
	// may ask for.
	AnnotationMaxSize = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"

	capacityPrefix = "capacity.cluster-autoscaler.kubernetes.io/"
	// AnnotationCPU is the cpu capacity of one machine (a quantity).
	AnnotationCPU = capacityPrefix + "cpu"
	// AnnotationMemory is the memory capacity of one machine (a quantity).
	AnnotationMemory = capacityPrefix + "memory"
	// AnnotationEphemeralDisk is the ephemeral-storage capacity of one
	// machine (a quantity).
	AnnotationEphemeralDisk = capacityPrefix + "ephemeral-disk"
	// AnnotationMaxPods is how many pods one machine runs (an integer).
	AnnotationMaxPods = capacityPrefix + "maxPods"
	// AnnotationGPUType is the extended resource name of the machine's
	// GPUs; nvidia.com/gpu when only a count is given.
	AnnotationGPUType = capacityPrefix + "gpu-type"
	// AnnotationGPUCount is how many GPUs one machine has (an integer).
	AnnotationGPUCount = capacityPrefix + "gpu-count"
	// AnnotationLabels are the labels of a machine's node:
	// "key1=value1,key2=value2".
	AnnotationLabels = capacityPrefix + "labels"
	// AnnotationTaints are the taints of a machine's node:
	// "key1=value1:NoSchedule,key2:NoExecute".
	AnnotationTaints = capacityPrefix + "taints"

	// AnnotationScaleDownUnneededTime is how long a node of the object
	// must be unneeded before Cluster Autoscaler removes it (a Go
	// duration): berth's disruption.consolidateAfter.
	AnnotationScaleDownUnneededTime = "cluster.x-k8s.io/autoscaling-options-scaledownunneededtime"
	// AnnotationMaxNodeProvisionTime is how long a machine of the object
	// may take to register its node (a Go duration). berth reads it as
	// its machineTimeout, how long a Machine may go without a provider
	// ID; the node's registration after that is bounded by
	// --max-provision-time.
	AnnotationMaxNodeProvisionTime = "cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime"

	// AnnotationDeleteMachine on a Machine makes its MachineSet delete it
	// first when replicas go down.
	AnnotationDeleteMachine = "cluster.x-k8s.io/delete-machine"

	defaultGPUResource = "nvidia.com/gpu"
)

// Template is what a scalable object's annotations say about its machines
// and its size bounds. Nil bounds and empty fields were not annotated.
type Template struct {
	MinSize  *int32
	MaxSize  *int32
	Capacity corev1.ResourceList
	Labels   map[string]string
	Taints   []corev1.Taint
	// ConsolidateAfter and MachineTimeout are the object's
	// autoscaling options (AnnotationScaleDownUnneededTime,
	// AnnotationMaxNodeProvisionTime).
	ConsolidateAfter *time.Duration
	MachineTimeout   *time.Duration
	// Ignored says which annotations were left out (an autoscaling
	// option that does not parse: Cluster Autoscaler ignores it too).
	Ignored []string
}

// ParseAnnotations reads the Cluster Autoscaler annotations of a
// MachineDeployment, MachineSet or MachinePool. Every malformed annotation
// is reported (joined), naming the annotation and its value; what parsed
// is returned alongside. A capacity of zero is not given, and an empty
// entry of the labels or taints list is skipped, as Cluster Autoscaler
// reads them.
func ParseAnnotations(a map[string]string) (Template, error) {
	var t Template
	var errs []error
	t.MinSize, errs = parseSize(a, AnnotationMinSize, errs)
	t.MaxSize, errs = parseSize(a, AnnotationMaxSize, errs)
	if t.MinSize != nil && t.MaxSize != nil && *t.MinSize > *t.MaxSize {
		errs = append(errs, fmt.Errorf("%s (%d) is larger than %s (%d)", AnnotationMinSize, *t.MinSize, AnnotationMaxSize, *t.MaxSize))
	}
	t.Capacity = corev1.ResourceList{}
	for key, name := range map[string]corev1.ResourceName{
		AnnotationCPU: corev1.ResourceCPU, AnnotationMemory: corev1.ResourceMemory, AnnotationEphemeralDisk: corev1.ResourceEphemeralStorage,
	} {
		if v, ok := a[key]; ok && v != "" {
			q, err := quantity.Parse(v)
			if err != nil || q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%s=%q is not a non-negative quantity", key, v))
				continue
			}
			if q.IsZero() {
				continue // not given, as Cluster Autoscaler reads a zero: the template's status or the spec says
			}
			t.Capacity[name] = q
		}
	}
	if q, ok, err := parseCount(a, AnnotationMaxPods); err != nil {
		errs = append(errs, err)
	} else if ok && !q.IsZero() { // zero: the default, as Cluster Autoscaler reads it
		t.Capacity[corev1.ResourcePods] = q
	}
	if q, ok, err := parseCount(a, AnnotationGPUCount); err != nil {
		errs = append(errs, err)
	} else if ok && !q.IsZero() {
		gpu := a[AnnotationGPUType]
		if gpu == "" {
			gpu = defaultGPUResource
		}
		if msgs := validation.IsQualifiedName(gpu); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a resource name: %s", AnnotationGPUType, gpu, strings.Join(msgs, "; ")))
		} else {
			t.Capacity[corev1.ResourceName(gpu)] = q
		}
	}
	// An option as Cluster Autoscaler reads it (getDurationOption): lower
	// case, empty is not given, and one that does not parse is left out,
	// said in Ignored, and keeps no object from scaling.
	for key, d := range map[string]**time.Duration{AnnotationScaleDownUnneededTime: &t.ConsolidateAfter, AnnotationMaxNodeProvisionTime: &t.MachineTimeout} {
		v := strings.ToLower(strings.TrimSpace(a[key]))
		if v == "" {
			continue
		}
		parsed, err := time.ParseDuration(v)
		if err != nil || parsed < 0 {
			t.Ignored = append(t.Ignored, fmt.Sprintf("%s=%q is not a duration such as 10m or 1h30m", key, a[key]))
			continue
		}
		*d = &parsed
	}
	slices.Sort(t.Ignored)
	var err error
	if t.Labels, err = parseLabels(a[AnnotationLabels]); err != nil {
		errs = append(errs, err)
	}
	if t.Taints, err = parseTaints(a[AnnotationTaints]); err != nil {
		errs = append(errs, err)
	}
	return t, errors.Join(errs...)
}

func parseSize(a map[string]string, key string, errs []error) (*int32, []error) {
	v, ok := a[key]
	if !ok {
		return nil, errs
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 0 {
		return nil, append(errs, fmt.Errorf("%s=%q is not a non-negative integer", key, v))
	}
	s := int32(n)
	return &s, errs
}

// parseCount parses a non-negative integer annotation, bounded so that no
// later sum overflows.
func parseCount(a map[string]string, key string) (resource.Quantity, bool, error) {
	v, ok := a[key]
	if !ok || v == "" {
		return resource.Quantity{}, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return resource.Quantity{}, false, fmt.Errorf("%s=%q is not a non-negative integer", key, v)
	}
	return *resource.NewQuantity(n, resource.DecimalSI), true, nil
}

func parseLabels(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue // "a=b," as a template loop writes it: Cluster Autoscaler skips it too
		}
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(val)) > 0 {
			return nil, fmt.Errorf("%s: %q is not key=value with a valid label key and value", AnnotationLabels, kv)
		}
		out[k] = val
	}
	return out, nil
}

func parseTaints(v string) ([]corev1.Taint, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []corev1.Taint
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		kv, effect, ok := strings.Cut(s, ":")
		k, val, _ := strings.Cut(kv, "=")
		switch corev1.TaintEffect(effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			ok = false
		}
		if !ok || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(val)) > 0 {
			return nil, fmt.Errorf("%s: %q is not key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute", AnnotationTaints, s)
		}
		out = append(out, corev1.Taint{Key: k, Value: val, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// Apply narrows the group's size bounds to the annotated ones and lets
// the annotated capacity, labels and taints describe its (single)
// instance type and template. It changes ng in place: pass a copy.
// Labels berth sets itself are not taken from the annotation;
// kubernetes.io/arch is the instance type's architecture.
func (t Template) Apply(ng *v1alpha1.NodeGroup) {
	if t.MinSize != nil && *t.MinSize > ng.Spec.MinSize {
		ng.Spec.MinSize = *t.MinSize
	}
	if t.MaxSize != nil && *t.MaxSize < ng.Spec.MaxSize {
		ng.Spec.MaxSize = *t.MaxSize
	}
	if ng.Spec.MinSize > ng.Spec.MaxSize {
		ng.Spec.MinSize = ng.Spec.MaxSize
	}
	// The autoscaling options where the NodeGroup's spec says nothing.
	if t.ConsolidateAfter != nil && ng.Spec.Disruption.ConsolidateAfter == nil {
		ng.Spec.Disruption.ConsolidateAfter = &metav1.Duration{Duration: *t.ConsolidateAfter}
	}
	if p := ng.Spec.Provider.ClusterAPI; t.MachineTimeout != nil && p != nil && p.MachineTimeout == nil {
		p.MachineTimeout = &metav1.Duration{Duration: *t.MachineTimeout}
	}
	for i := range ng.Spec.InstanceTypes {
		it := &ng.Spec.InstanceTypes[i]
		if it.Capacity == nil {
			it.Capacity = corev1.ResourceList{}
		}
		for name, q := range t.Capacity {
			it.Capacity[name] = q
		}
	}
	for k, v := range t.Labels {
		if k == v1alpha1.LabelArch { // the machines' architecture: the type's field, which NodeLabels reads
			for i := range ng.Spec.InstanceTypes {
				ng.Spec.InstanceTypes[i].Architecture = v
			}
			continue
		}
		if reservedLabels[k] {
			continue
		}
		if ng.Spec.Template.Labels == nil {
			ng.Spec.Template.Labels = map[string]v1alpha1.LabelValue{}
		}
		ng.Spec.Template.Labels[k] = v1alpha1.LabelValue(v)
	}
	for _, taint := range t.Taints {
		nt := v1alpha1.NodeTaint{Key: taint.Key, Value: taint.Value, Effect: v1alpha1.TaintEffect(taint.Effect)}
		switch {
		case strings.HasPrefix(taint.Key, statusTaintPrefix):
		case nodeutil.StartupByConvention(taint):
			if !hasTaint(ng.Spec.Template.StartupTaints, taint) {
				ng.Spec.Template.StartupTaints = append(ng.Spec.Template.StartupTaints, nt)
			}
		case !hasTaint(ng.Spec.Template.Taints, taint):
			ng.Spec.Template.Taints = append(ng.Spec.Template.Taints, nt)
		}
	}
}

// statusTaintPrefix names taints that tell a node's status (Cluster
// Autoscaler's status taints), not where pods may go: Cluster Autoscaler
// leaves them out of a template node, and so does berth. The startup
// taints by convention (nodeutil.StartupByConvention) are the group's
// startup taints: a new node has them until it is up.
const statusTaintPrefix = "status-taint.cluster-autoscaler.kubernetes.io/"

// reservedLabels are set by berth on every node of a group, from the
// group itself (the deprecated beta names from their well-known labels);
// an annotation cannot change them. kubernetes.io/os is the template's,
// so an annotation says it (Windows machines).
var reservedLabels = map[string]bool{
	v1alpha1.LabelNodeGroup: true, v1alpha1.LabelCapacityType: true, v1alpha1.LabelInitialized: true,
	v1alpha1.LabelHostname: true, v1alpha1.LabelInstanceType: true, v1alpha1.LabelZone: true,
	v1alpha1.LabelOSBeta: true, v1alpha1.LabelArchBeta: true, v1alpha1.LabelInstanceTypeBeta: true, v1alpha1.LabelZoneBeta: true,
}

func hasTaint(ts []v1alpha1.NodeTaint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Effect == v1alpha1.TaintEffect(t.Effect) {
			return true
		}
	}
	return false
}

// ManagedLabels are the labels of a machine template (its
// metadata.labels) that Cluster API's Machine controller keeps on the
// Machine's Node: the node-role.kubernetes.io/ prefix and the
// node-restriction.kubernetes.io and node.cluster.x-k8s.io domains, their
// subdomains included. A node of the group has them, so a pod may select
// them before it exists.
func ManagedLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for k, v := range labels {
		prefix, _, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		if prefix != "node-role.kubernetes.io" && !inDomain(prefix, "node-restriction.kubernetes.io") && !inDomain(prefix, "node.cluster.x-k8s.io") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// inDomain reports whether host is domain or one of its subdomains.
func inDomain(host, domain string) bool {
	return host == domain || strings.HasSuffix(host, "."+domain)
}

// withManagedLabels adds the managed labels of the object's machine
// template (spec.template.metadata.labels, where Cluster API reads them;
// spec.template.spec.metadata.labels too, where Cluster Autoscaler does)
// under the labels annotation, which wins.
func (t *Template) withManagedLabels(obj map[string]any) {
	for _, path := range [][]string{{"spec", "template", "metadata", "labels"}, {"spec", "template", "spec", "metadata", "labels"}} {
		if labels, _, err := unstructured.NestedStringMap(obj, path...); err == nil {
			t.addLabelsUnder(ManagedLabels(labels))
		}
	}
}
