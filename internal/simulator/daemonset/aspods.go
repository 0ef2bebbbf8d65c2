package daemonset

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/podutil"
)

// A DaemonSet's pods can request what its template does not: a
// LimitRange's defaults, a mutating webhook's sidecar or requests (a
// vertical autoscaler), a RuntimeClass's overhead are given to the pods
// when they are admitted, never to the template. A pod of the DaemonSet
// made from its current template therefore says better than the template
// what the DaemonSet's pod on a new node will hold. Newest keeps such
// pods; AsRun makes of each DaemonSet one whose template is its pod's
// or, while it has none, its template as admission will complete it
// (Admission).

// AnnotationAsRun marks a DaemonSet AsRun made from one of its pods, or
// from its template with what admission gives its pods; its value names
// what the pod holds on a node (its requests and host ports), so that
// what is kept from round to round for the DaemonSet's generation is not
// kept past a change of its pods, of its namespace's LimitRanges or of
// its RuntimeClass. It is never written to the API server.
const AnnotationAsRun = "berth.dev/daemonset-as-run"

// Newest is the newest pod of each DaemonSet (by the DaemonSet's UID) for
// each template generation its pods carry (the DaemonSet controller's
// pod-template-generation label; "" for a pod without it). The zero value
// is not usable: make one with NewestOf or make(Newest).
type Newest map[types.UID]map[string]*corev1.Pod

// NewestOf files every pod of pods that a DaemonSet controls.
func NewestOf(pods []*corev1.Pod) Newest {
	out := Newest{}
	for _, p := range pods {
		out.Add(p)
	}
	return out
}

// Add files p if a DaemonSet controls it and it is newer than the pod
// filed for its generation (by creation time, then name: the same pods
// give the same choice in any order). p is kept, not copied: it must not
// change.
func (n Newest) Add(p *corev1.Pod) {
	ref := podutil.DaemonSetOf(p)
	if ref == nil {
		return
	}
	uid := ref.UID
	gen := generationOf(p)
	byGen := n[uid]
	if byGen == nil {
		byGen = map[string]*corev1.Pod{}
		n[uid] = byGen
	}
	if old := byGen[gen]; old == nil || newer(p, old) {
		byGen[gen] = p
	}
}

// Chose reports whether p is the pod n holds for its DaemonSet and
// generation.
func (n Newest) Chose(p *corev1.Pod) bool {
	ref := podutil.DaemonSetOf(p)
	return ref != nil && n[ref.UID][generationOf(p)] == p
}

func generationOf(p *corev1.Pod) string {
	return p.Labels[extensionsv1beta1.DaemonSetTemplateGenerationKey]
}

func newer(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace > b.Namespace
	}
	return a.Name > b.Name
}

// For is the pod that stands for the DaemonSet's pods on a new node: the
// newest made from its current template (its generation, which the API
// server writes in the annotation deprecated.daemonset.template.generation
// and the DaemonSet controller in each pod's label). nil when none is,
// as during a rollout whose new pods are not made yet: the template then
// says more than the old pods. A DaemonSet without the annotation (a
// hand-written `berth plan` input) takes its newest pod of any generation.
func (n Newest) For(ds *appsv1.DaemonSet) *corev1.Pod {
	byGen := n[ds.UID]
	if len(byGen) == 0 || ds.UID == "" {
		return nil
	}
	if gen, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; ok {
		return byGen[gen]
	}
	var out *corev1.Pod
	for _, p := range byGen {
		if out == nil || newer(p, out) {
			out = p
		}
	}
	return out
}

// Clone is a copy of n that Add on either does not change for the other
// (the pods are shared).
func (n Newest) Clone() Newest {
	out := make(Newest, len(n))
	for uid, byGen := range n {
		out[uid] = maps.Clone(byGen)
	}
	return out
}

// Admission is what the API server's admission gives a DaemonSet's pods
// that its template does not say and that berth can know before a pod
// exists: the container defaults of the namespace's LimitRanges (the
// LimitRanger plugin) and the overhead and node selector of the
// RuntimeClass the pods name (the RuntimeClass plugin). A mutating
// webhook's changes cannot be known before a pod exists.
type Admission struct {
	LimitRanges    []*corev1.LimitRange
	RuntimeClasses []*nodev1.RuntimeClass
}

// admit gives a pod spec of namespace ns what admission gives it (after a
// Pod's defaults, which the plugins see applied); it reports whether
// anything changed.
func (a Admission) admit(spec *corev1.PodSpec, ns string) bool {
	changed := podutil.Admit(spec, ns, a.LimitRanges)
	return withRuntimeClass(spec, a.RuntimeClasses) || changed
}

// AsRun is dss as their pods will run on a new node. A DaemonSet that has
// a pod in n (For) is replaced by a copy whose template's spec is that
// pod's, but for what the DaemonSet controller writes into each pod for
// its node (the node name, and the required node affinity it replaces by
// the node's name: the template's affinity is kept, and its tolerations,
// by which the controller chooses the nodes) and what a pod gets
// after it is made (ephemeral containers; scheduling gates, which only
// the admission of a new pod sets). A DaemonSet without such a pod is
// read from its template as the API server will admit its pods (adm).
// Pods reads the copies as it reads any DaemonSet. dss and its
// DaemonSets are not changed; a DaemonSet that neither changes is
// returned as it is.
func AsRun(dss []*appsv1.DaemonSet, n Newest, adm Admission) []*appsv1.DaemonSet {
	if len(n) == 0 && len(adm.LimitRanges) == 0 && len(adm.RuntimeClasses) == 0 {
		return dss
	}
	out := make([]*appsv1.DaemonSet, len(dss))
	for i, ds := range dss {
		out[i] = ds
		var spec *corev1.PodSpec
		if p := n.For(ds); p != nil {
			spec = p.Spec.DeepCopy()
			spec.NodeName = ""
			spec.Affinity = ds.Spec.Template.Spec.Affinity.DeepCopy()
			// The controller chooses nodes by the template's tolerations
			// (Pods adds its own); admission's come after.
			spec.Tolerations = slices.Clone(ds.Spec.Template.Spec.Tolerations)
			// What a pod gets after it is made, and a template may not have.
			spec.EphemeralContainers, spec.SchedulingGates = nil, nil
		} else if spec = ds.Spec.Template.Spec.DeepCopy(); !adm.admit(spec, ds.Namespace) {
			continue
		}
		c := &appsv1.DaemonSet{TypeMeta: ds.TypeMeta, ObjectMeta: ds.ObjectMeta, Spec: ds.Spec, Status: ds.Status}
		c.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: *spec}
		c.Annotations = maps.Clone(ds.Annotations)
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[AnnotationAsRun] = holdsKey(Pods([]*appsv1.DaemonSet{c})[0])
		out[i] = c
	}
	return out
}

// holdsKey names what a DaemonSet's pod holds on a node (its requests
// and host ports) and where it runs (its tolerations, and its node
// selector, which admission may have added to its template's).
func holdsKey(d Pod) string {
	names := slices.Sorted(maps.Keys(d.List))
	var b strings.Builder
	for _, name := range names {
		q := d.List[name]
		fmt.Fprintf(&b, "%s=%s,", name, q.String())
	}
	for _, hp := range d.Ports {
		fmt.Fprintf(&b, "%s/%s:%d,", hp.Protocol, hp.IP, hp.Port)
	}
	for _, t := range d.pod.Spec.Tolerations {
		fmt.Fprintf(&b, "%s%s%s:%s,", t.Key, t.Operator, t.Value, t.Effect)
	}
	for _, k := range slices.Sorted(maps.Keys(d.pod.Spec.NodeSelector)) {
		fmt.Fprintf(&b, "%s=%s,", k, d.pod.Spec.NodeSelector[k])
	}
	return b.String()
}
