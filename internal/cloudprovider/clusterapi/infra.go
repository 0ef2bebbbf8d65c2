package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/quantity"
)

// Cluster API's opt-in autoscaling-from-zero contract: an infrastructure
// machine template may report what its machines will be, in
// status.capacity (a resource list) and status.nodeInfo (architecture,
// operatingSystem). Cluster Autoscaler reads it under the scalable
// object's capacity annotations, which win key by key; so does berth.

// infraRef returns the reference of the scalable object's machine template
// to its infrastructure template (spec.template.spec.infrastructureRef):
// v1beta2 names its apiGroup, v1beta1 its apiVersion. ok is false when
// the object has none.
func infraRef(obj *unstructured.Unstructured) (gk schema.GroupKind, version, name string, ok bool) {
	m, found, err := unstructured.NestedStringMap(obj.Object, "spec", "template", "spec", "infrastructureRef")
	if !found || err != nil || m["kind"] == "" || m["name"] == "" {
		return schema.GroupKind{}, "", "", false
	}
	gk.Kind = m["kind"]
	if m["apiVersion"] != "" {
		gv, err := schema.ParseGroupVersion(m["apiVersion"])
		if err != nil {
			return schema.GroupKind{}, "", "", false
		}
		gk.Group, version = gv.Group, gv.Version
	} else {
		gk.Group = m["apiGroup"]
	}
	return gk, version, m["name"], true
}

// errNoInfraTemplate: the object names no infrastructure template.
var errNoInfraTemplate = errors.New("no spec.template.spec.infrastructureRef")

// readInfraTemplate reads the infrastructure template obj's machines are
// made from, in obj's namespace. Its version is the reference's (v1beta1)
// or the one the API server prefers for its group and kind.
func (p *Provider) readInfraTemplate(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gk, version, name, ok := infraRef(obj)
	if !ok {
		return nil, errNoInfraTemplate
	}
	if version == "" {
		m, err := p.mgmt.RESTMapper().RESTMapping(gk)
		if err != nil {
			return nil, fmt.Errorf("infrastructure template %s %s: %w", gk, name, err)
		}
		version = m.GroupVersionKind.Version
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gk.WithVersion(version))
	if err := p.mgmt.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, u); err != nil {
		return nil, fmt.Errorf("infrastructure template %s %s: %w", gk, name, err)
	}
	return u, nil
}

// InfraTemplateStatus reads what an infrastructure template reports of its
// machines (status.capacity; status.nodeInfo as the kubernetes.io/arch
// and kubernetes.io/os labels) into a Template. A quantity that does not
// parse, or is negative, is an error naming it; what parsed is returned
// alongside. An empty Template: the template reports nothing.
func InfraTemplateStatus(u *unstructured.Unstructured) (Template, error) {
	t := Template{Capacity: corev1.ResourceList{}}
	var errs []error
	capacity, _, err := unstructured.NestedMap(u.Object, "status", "capacity")
	if err != nil {
		errs = append(errs, fmt.Errorf("status.capacity: %w", err))
	}
	for name, v := range capacity {
		var s string
		ok := true
		switch v := v.(type) {
		case string:
			s = v
		case int64, float64:
			s = fmt.Sprint(v)
		default:
			ok = false
		}
		q, err := quantity.Parse(s)
		if !ok || err != nil || q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("status.capacity.%s=%v is not a non-negative quantity", name, v))
			continue
		}
		t.Capacity[corev1.ResourceName(name)] = q
	}
	for field, label := range map[string]string{"architecture": v1alpha1.LabelArch, "operatingSystem": corev1.LabelOSStable} {
		v, _, err := unstructured.NestedString(u.Object, "status", "nodeInfo", field)
		if err != nil {
			errs = append(errs, fmt.Errorf("status.nodeInfo.%s: %w", field, err))
			continue
		}
		if v != "" {
			if t.Labels == nil {
				t.Labels = map[string]string{}
			}
			t.Labels[label] = v
		}
	}
	return t, errors.Join(errs...)
}

// infraStatus reads the infrastructure template's status for obj, the
// object of group. An object without a template, or whose template (or
// its kind) does not exist, gives nothing: its provider does not take
// part in the contract. A template that cannot be read (berth may not
// read its group, say) gives nothing either, and the entries of its
// status that do not parse are left out, as Cluster Autoscaler leaves
// them: each said once in the log per reason. The annotations' bounds,
// capacity, labels and taints apply whatever the template says.
//
// What a template says is kept for InfraTemplateTTL (templates are
// immutable by Cluster API's convention; their status is written once by
// their provider), so that a round does not read every group's template
// from the management cluster again.
func (p *Provider) infraStatus(ctx context.Context, group string, obj *unstructured.Unstructured) Template {
	gk, version, name, _ := infraRef(obj)
	key := infraKey{gk: gk, version: version, namespace: obj.GetNamespace(), name: name}
	p.mu.Lock()
	c, ok := p.infraCache[key]
	p.mu.Unlock()
	if ok && p.clock.Since(c.at) < InfraTemplateTTL {
		return c.tmpl
	}
	t, keep := p.readInfraStatus(ctx, group, obj)
	if !keep {
		return t
	}
	p.mu.Lock()
	for k, c := range p.infraCache { // forget templates no group reads any more
		if p.clock.Since(c.at) >= InfraTemplateTTL {
			delete(p.infraCache, k)
		}
	}
	p.infraCache[key] = infraCached{tmpl: t, at: p.clock.Now()}
	p.mu.Unlock()
	return t
}

// InfraTemplateTTL is how long what an infrastructure template says is
// kept before it is read again.
const InfraTemplateTTL = time.Minute

type infraKey struct {
	gk                       schema.GroupKind
	version, namespace, name string
}

type infraCached struct {
	tmpl Template
	at   time.Time
}

// readInfraStatus is infraStatus without the cache; keep says whether
// the answer may be kept: not after a failure that may pass (a timeout,
// the API server busy), which the next round tries again.
func (p *Provider) readInfraStatus(ctx context.Context, group string, obj *unstructured.Unstructured) (t Template, keep bool) {
	u, err := p.readInfraTemplate(ctx, obj)
	switch {
	case errors.Is(err, errNoInfraTemplate) || meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		p.sayOnce(ctx, "infra/"+group, group, nil, "")
		return Template{}, true
	case err != nil:
		p.sayOnce(ctx, "infra/"+group, group, err, "planning the node group without its infrastructure template's status: it could not be read")
		return Template{}, apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
	}
	t, err = InfraTemplateStatus(u)
	p.sayOnce(ctx, "infra/"+group, group, err, "planning the node group without the entries of its infrastructure template's status that cannot be read")
	return t, true
}

// sayOnce logs msg and err for group unless it was the last thing said
// under key; a nil err clears what was said.
func (p *Provider) sayOnce(ctx context.Context, key, group string, err error, msg string) {
	said := ""
	if err != nil {
		said = err.Error()
	}
	p.mu.Lock()
	again := p.said[key] == said
	p.said[key] = said
	p.mu.Unlock()
	if err != nil && !again {
		log.FromContext(ctx).Info(msg, "nodeGroup", group, "error", said)
	}
}

// withInfraStatus fills what the annotations did not say from the
// infrastructure template's status, as Cluster Autoscaler does: each
// resource of its capacity that no annotation gives, its architecture
// and operating system unless the labels annotation names them.
func (t *Template) withInfraStatus(s Template) {
	for name, q := range s.Capacity {
		if _, ok := t.Capacity[name]; ok {
			continue
		}
		if t.Capacity == nil {
			t.Capacity = corev1.ResourceList{}
		}
		t.Capacity[name] = q
	}
	t.addLabelsUnder(s.Labels)
}

// addLabelsUnder adds the labels t does not have already (the labels
// annotation wins).
func (t *Template) addLabelsUnder(labels map[string]string) {
	for k, v := range labels {
		if _, ok := t.Labels[k]; ok {
			continue
		}
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[k] = v
	}
}
