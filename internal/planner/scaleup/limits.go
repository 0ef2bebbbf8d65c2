package scaleup

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/binpack"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// DefaultClusterLimits cap the total capacity of all nodes when the caller
// sets none.
var DefaultClusterLimits = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("1000"),
	corev1.ResourceMemory: resource.MustParse("4000Gi"),
}

// limit is a cap on some resources; only the resources it names are capped.
type limit struct {
	names []corev1.ResourceName
	max   snapshot.Resources
}

func newLimit(rl corev1.ResourceList) limit {
	l := limit{max: snapshot.FromList(rl)}
	for name := range rl {
		l.names = append(l.names, name)
	}
	sort.Slice(l.names, func(i, j int) bool { return l.names[i] < l.names[j] })
	return l
}

func amount(r *snapshot.Resources, name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	}
	return r.Scalar[name]
}

// exceeded returns the first resource that used + add would push over the
// limit, or "".
func (l limit) exceeded(used, add *snapshot.Resources) corev1.ResourceName {
	for _, n := range l.names {
		if amount(used, n)+amount(add, n) > amount(&l.max, n) {
			return n
		}
	}
	return ""
}

// launcher applies node group max sizes, node group limits and cluster
// limits to the options of a template.
type launcher struct {
	groups  map[string]*v1alpha1.NodeGroup
	limits  map[string]limit
	cluster limit
}

var _ binpack.Launcher = (*launcher)(nil)

func newLauncher(groups []*v1alpha1.NodeGroup, cluster corev1.ResourceList) *launcher {
	l := &launcher{groups: map[string]*v1alpha1.NodeGroup{}, limits: map[string]limit{}, cluster: newLimit(cluster)}
	for _, ng := range groups {
		l.groups[ng.Name] = ng
		l.limits[ng.Name] = newLimit(ng.Spec.Limits)
	}
	return l
}

// Allowed returns the options of t that one more node may use.
func (l *launcher) Allowed(s *snapshot.Snapshot, t *binpack.Template) ([]*snapshot.Option, string) {
	ng := l.groups[t.Group]
	usage := s.Group(t.Group)
	if usage.Nodes >= int(ng.Spec.MaxSize) {
		return nil, fmt.Sprintf("node group at maxSize %d", ng.Spec.MaxSize)
	}
	total := s.Total()
	all := t.Node.Flex.Options
	out := make([]*snapshot.Option, 0, len(all))
	var groupHit, clusterHit corev1.ResourceName
	for _, o := range all {
		if n := l.limits[t.Group].exceeded(&usage.Capacity, &o.Allocatable); n != "" {
			groupHit = n
			continue
		}
		if n := l.cluster.exceeded(&total, &o.Allocatable); n != "" {
			clusterHit = n
			continue
		}
		out = append(out, o)
	}
	if len(out) > 0 {
		return out, ""
	}
	var why []string
	if groupHit != "" {
		gl := l.limits[t.Group]
		why = append(why, fmt.Sprintf("node group limit on %s reached (%s of %s)", groupHit,
			snapshot.FormatQuantity(groupHit, amount(&usage.Capacity, groupHit)), snapshot.FormatQuantity(groupHit, amount(&gl.max, groupHit))))
	}
	if clusterHit != "" {
		why = append(why, fmt.Sprintf("cluster limit on %s reached (%s of %s)", clusterHit,
			snapshot.FormatQuantity(clusterHit, amount(&total, clusterHit)), snapshot.FormatQuantity(clusterHit, amount(&l.cluster.max, clusterHit))))
	}
	return nil, strings.Join(why, "; ")
}
