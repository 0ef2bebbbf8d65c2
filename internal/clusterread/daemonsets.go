package clusterread

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// DaemonSetsAsRun is dss as their pods run (daemonset.AsRun), for a
// reader that does not read every pod: it lists the pods of the
// DaemonSets' namespaces only, their LimitRanges and the RuntimeClasses,
// from c (the manager's cache, not copied); with no DaemonSet, nothing.
// dss is not changed.
func DaemonSetsAsRun(ctx context.Context, c client.Reader, dss []*appsv1.DaemonSet) ([]*appsv1.DaemonSet, error) {
	if len(dss) == 0 {
		return nil, nil
	}
	newest := daemonset.Newest{}
	var adm daemonset.Admission
	rcs := &nodev1.RuntimeClassList{}
	if err := c.List(ctx, rcs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing runtime classes: %w", err)
	}
	for i := range rcs.Items {
		adm.RuntimeClasses = append(adm.RuntimeClasses, &rcs.Items[i])
	}
	seen := map[string]bool{}
	for _, ds := range dss {
		if seen[ds.Namespace] {
			continue
		}
		seen[ds.Namespace] = true
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ds.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the pods of namespace %s: %w", ds.Namespace, err)
		}
		for i := range pods.Items {
			newest.Add(&pods.Items[i])
		}
		lrs, err := LimitRanges(ctx, c, ds.Namespace)
		if err != nil {
			return nil, err
		}
		adm.LimitRanges = append(adm.LimitRanges, lrs...)
	}
	return daemonset.AsRun(dss, newest, adm), nil
}

// LimitRanges are the LimitRanges of namespace ns ("": of every
// namespace), whose container defaults the pods made there get
// (podutil.Admit): the cache's own objects, never to be changed.
func LimitRanges(ctx context.Context, c client.Reader, ns string) ([]*corev1.LimitRange, error) {
	l := &corev1.LimitRangeList{}
	if err := c.List(ctx, l, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		if ns == "" {
			return nil, fmt.Errorf("listing limit ranges: %w", err)
		}
		return nil, fmt.Errorf("listing the limit ranges of namespace %s: %w", ns, err)
	}
	return pointers(l.Items), nil
}
