package nodeadoption_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/nodeadoption"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// adopter adopts nodes whose provider ID it knows into one group.
type adopter struct {
	ng  *v1alpha1.NodeGroup
	ids map[string]bool
}

func (a adopter) Adopt(_ context.Context, n *corev1.Node) (*v1alpha1.NodeGroup, error) {
	if a.ids[n.Spec.ProviderID] {
		return a.ng, nil
	}
	return nil, nil
}

// TestAdoptsTheNodesOfTheGroupsMachines: a node whose Machine belongs to
// the group gets the group's labels and owner mark, keeps the labels it
// had (a cloud's zone), and gets an event; a node of no group's Machine is
// left alone.
func TestAdoptsTheNodesOfTheGroupsMachines(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("adopt", b.InstanceType("m-4", "4", "8Gi", b.OnDemand("zone-a", "0.2")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: "md"}}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	mine := b.Node("adopt-mine", "4", "8Gi")
	mine.Spec.ProviderID = "test://mine"
	mine.Labels[v1alpha1.LabelZone] = "eu-1b"
	delete(mine.Labels, v1alpha1.LabelNodeGroup)
	other := b.Node("adopt-other", "4", "8Gi")
	other.Spec.ProviderID = "test://other"
	delete(other.Labels, v1alpha1.LabelNodeGroup)
	for _, n := range []*corev1.Node{mine, other} {
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	}
	events := &fakes.Recorder{}
	r := &nodeadoption.Reconciler{Client: env.Client, Adopter: adopter{ng: ng, ids: map[string]bool{"test://mine": true}}, Recorder: events}
	for _, name := range []string{"adopt-mine", "adopt-other"} {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	got := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "adopt-mine"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1alpha1.LabelNodeGroup] != "adopt" || got.Labels[v1alpha1.LabelInstanceType] != "m-4" ||
		got.Labels[v1alpha1.LabelCapacityType] != "on-demand" || got.Annotations[v1alpha1.AnnotationLaunchedBy] != string(ng.UID) {
		t.Errorf("adopted node labels %v annotations %v: want the group's labels and owner mark", got.Labels, got.Annotations)
	}
	if got.Labels[v1alpha1.LabelZone] != "eu-1b" || got.Labels[v1alpha1.LabelZoneBeta] != "eu-1b" {
		t.Errorf("zone labels %q and %q (beta): want the node's own eu-1b kept, and the beta label the same", got.Labels[v1alpha1.LabelZone], got.Labels[v1alpha1.LabelZoneBeta])
	}
	if len(events.For("adopt-mine")) != 1 {
		t.Errorf("events on the adopted node: %v, want one", events.For("adopt-mine"))
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "adopt-other"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1alpha1.LabelNodeGroup] != "" || got.Annotations[v1alpha1.AnnotationLaunchedBy] != "" {
		t.Errorf("a node of no group's machine was changed: %v %v", got.Labels, got.Annotations)
	}
}
