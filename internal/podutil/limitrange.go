package podutil

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Admit gives spec, of a pod admitted in namespace ns, what the API
// server's admission gives every Pod and berth can know before the pod
// exists: the Pod defaults the planner reads (ApplyDefaults), then the
// container defaults of the namespace's LimitRanges (the LimitRanger
// plugin, which sees the defaults applied). A mutating webhook's changes
// cannot be known. It reports whether the LimitRanges changed anything.
func Admit(spec *corev1.PodSpec, ns string, lrs []*corev1.LimitRange) bool {
	ApplyDefaults(spec)
	if d := defaultsIn(lrs, ns); !d.empty() {
		return d.apply(spec)
	}
	return false
}

// containerDefaults are the requests and limits the LimitRanger admission
// plugin gives a container of a pod admitted in a namespace, for each
// resource the container does not set: the defaults of the namespace's
// LimitRanges of type Container.
type containerDefaults struct {
	requests, limits corev1.ResourceList
}

// defaultsIn are the container defaults of the LimitRanges of lrs in
// namespace ns. The plugin applies each LimitRange in turn and only fills
// what is still missing, so the first LimitRange that sets a resource
// wins; it takes them in its lister's order, which the API does not fix,
// and this takes them by name. Each item is read with the API server's
// defaults for a LimitRange (a default limit from max, a default request
// from the default limit, else from min), which a LimitRange read from
// the API server already carries and a hand-written one may not.
func defaultsIn(lrs []*corev1.LimitRange, ns string) containerDefaults {
	var in []*corev1.LimitRange
	for _, lr := range lrs {
		if lr.Namespace == ns {
			in = append(in, lr)
		}
	}
	slices.SortFunc(in, func(a, b *corev1.LimitRange) int { return cmp.Compare(a.Name, b.Name) })
	out := containerDefaults{requests: corev1.ResourceList{}, limits: corev1.ResourceList{}}
	for _, lr := range in {
		// The API server allows one item of each type; of a hand-written
		// LimitRange with more, the later wins, as in the plugin.
		requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
		for i := range lr.Spec.Limits {
			item := &lr.Spec.Limits[i]
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			def := fill(fill(corev1.ResourceList{}, item.Default), item.Max)
			for name, q := range fill(fill(fill(corev1.ResourceList{}, item.DefaultRequest), def), item.Min) {
				requests[name] = q
			}
			for name, q := range def {
				limits[name] = q
			}
		}
		fill(out.requests, requests)
		fill(out.limits, limits)
	}
	return out
}

// fill sets in dst each resource of src that dst does not have; it
// returns dst.
func fill(dst, src corev1.ResourceList) corev1.ResourceList {
	for name, q := range src {
		if _, ok := dst[name]; !ok {
			dst[name] = q.DeepCopy()
		}
	}
	return dst
}

// empty reports whether no resource is defaulted.
func (d containerDefaults) empty() bool { return len(d.requests) == 0 && len(d.limits) == 0 }

// apply gives every container and init container of spec the defaults it
// lacks, as the plugin does after the API server's own defaults (a
// container that limits a resource already requests it: apply that
// first). It reports whether it changed anything.
func (d containerDefaults) apply(spec *corev1.PodSpec) bool {
	changed := false
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			r := &cs[i].Resources
			had := len(r.Limits) + len(r.Requests)
			r.Limits, r.Requests = fillMade(r.Limits, d.limits), fillMade(r.Requests, d.requests)
			changed = changed || len(r.Limits)+len(r.Requests) != had
		}
	}
	return changed
}

// fillMade is fill on dst, made first when it is nil and src has any.
func fillMade(dst, src corev1.ResourceList) corev1.ResourceList {
	if dst == nil && len(src) > 0 {
		dst = corev1.ResourceList{}
	}
	return fill(dst, src)
}
