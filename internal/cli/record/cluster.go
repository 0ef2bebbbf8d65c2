package record

import (
	"context"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

func metaType(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// clean drops what the API server set (status, UID, versions, managed
// fields): the file is an input, as if written by hand.
func clean[T interface {
	client.Object
	runtime.Object
}](o T) runtime.Object {
	o.SetUID("")
	o.SetResourceVersion("")
	o.SetGeneration(0)
	o.SetManagedFields(nil)
	o.SetCreationTimestamp(metav1.Time{})
	o.SetFinalizers(nil)
	switch x := any(o).(type) {
	case *v1alpha1.NodeGroup:
		x.Status = v1alpha1.NodeGroupStatus{}
	case *v1alpha1.Headroom:
		x.Status = v1alpha1.HeadroomStatus{}
	case *appsv1.DaemonSet:
		x.Status = appsv1.DaemonSetStatus{}
	}
	return o
}

// writeCluster writes the NodeGroups, Headrooms and DaemonSets (as their
// pods run: clusterread.DaemonSetsAsRun) as YAML documents.
func writeCluster(ctx context.Context, cfg *rest.Config, path string) error {
	raw, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	c := clusterread.Bounded(raw) // the DaemonSets' pod templates
	groups := &v1alpha1.NodeGroupList{}
	headrooms := &v1alpha1.HeadroomList{}
	daemonSets := &appsv1.DaemonSetList{}
	for _, l := range []client.ObjectList{groups, headrooms, daemonSets} {
		if err := c.List(ctx, l); err != nil {
			return fmt.Errorf("reading the cluster: %w", err)
		}
	}
	var objs []runtime.Object
	for i := range groups.Items {
		g := &groups.Items[i]
		g.TypeMeta = metaType(v1alpha1.GroupVersion.String(), "NodeGroup")
		objs = append(objs, clean(g))
	}
	for i := range headrooms.Items {
		h := &headrooms.Items[i]
		h.TypeMeta = metaType(v1alpha1.GroupVersion.String(), "Headroom")
		objs = append(objs, clean(h))
	}
	// As their pods run: what a LimitRange or webhook gave the pods is
	// what the DaemonSets hold on the nodes the simulation launches.
	dss := make([]*appsv1.DaemonSet, len(daemonSets.Items))
	for i := range daemonSets.Items {
		dss[i] = &daemonSets.Items[i]
	}
	asRun, err := clusterread.DaemonSetsAsRun(ctx, c, dss)
	if err != nil {
		return fmt.Errorf("reading the cluster: %w", err)
	}
	for _, d := range asRun {
		d = d.DeepCopy()
		delete(d.Annotations, daemonset.AnnotationAsRun) // berth's own mark, not the DaemonSet's
		d.TypeMeta = metaType("apps/v1", "DaemonSet")
		objs = append(objs, clean(d))
	}
	var out []byte
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		out = append(append(out, "---\n"...), b...)
	}
	return os.WriteFile(path, out, 0o644) //nolint:gosec // a report the user asked for
}
