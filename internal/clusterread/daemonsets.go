package clusterread

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// DaemonSetsAsRun is dss as their pods run (daemonset.AsRun), for a
// reader that does not read every pod: it lists the pods of the
// DaemonSets' namespaces only, and their LimitRanges, from c (the
// manager's cache, not copied).
// dss is not changed.
func DaemonSetsAsRun(ctx context.Context, c client.Reader, dss []*appsv1.DaemonSet) ([]*appsv1.DaemonSet, error) {
	newest := daemonset.Newest{}
	var lrs []*corev1.LimitRange
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
		l := &corev1.LimitRangeList{}
		if err := c.List(ctx, l, client.InNamespace(ds.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the limit ranges of namespace %s: %w", ds.Namespace, err)
		}
		for i := range l.Items {
			lrs = append(lrs, &l.Items[i])
		}
	}
	return daemonset.AsRun(dss, newest, lrs), nil
}
