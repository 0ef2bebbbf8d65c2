package companion_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	ctrlcompanion "github.com/berth-dev/berth/internal/controller/companion"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestAPlaceholderWhoseCompanionWentBeforeTheHandoverIsLookedAtAgain: the
// companion a placeholder's pass found is deleted before it is marked as
// taking the room (the API server answers NotFound). The placeholder is
// looked at again soon, as when no companion was there; before, nothing
// brought it back until the informer's resync, hours later, and it held
// the room meanwhile.
func TestAPlaceholderWhoseCompanionWentBeforeTheHandoverIsLookedAtAgain(t *testing.T) {
	ctx := context.Background()
	const ns = "handover-gone"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	node := upNode(t, "handover-gone-node", "8", "16Gi")
	// A workload nominated to the node holds room there, as in
	// TestACompanionTakesTheRoomOfOnePlaceholderOnce.
	w := b.Pod("w", b.Namespace(ns), b.NoUID(), b.CPU("1"), b.Labels("app", ns))
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	create(t, w)
	own := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	pass(t, own, w)
	nominate(t, w, node.Name)
	pass(t, own, w)
	l := &corev1.PodList{}
	if err := env.Client.List(ctx, l, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}); err != nil {
		t.Fatal(err)
	}
	var ph *corev1.Pod
	for i := range l.Items {
		if l.Items[i].Annotations[v1alpha1.AnnotationCompanionNode] == node.Name {
			ph = &l.Items[i]
		}
	}
	if ph == nil {
		t.Fatalf("no placeholder on %s for the nominated workload", node.Name)
	}
	c := companionOf(ns, "companion", node.Name)
	create(t, c)
	gone := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetNamespace() == ns && obj.GetName() == c.Name {
				return apierrors.NewNotFound(corev1.Resource("pods"), c.Name)
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	r := &ctrlcompanion.Reconciler{Client: gone, Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ph)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("the placeholder's pass asked to be run again after %v, want a requeue: its companion went before it took the room", res.RequeueAfter)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Pod{}); err != nil {
		t.Errorf("the placeholder is gone (%v): no companion took its room", err)
	}
}
