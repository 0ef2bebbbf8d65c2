package companion_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	ctrlcompanion "github.com/berth-dev/berth/internal/controller/companion"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// TestPodsOfOtherNamespacesTakeNoRoom: what a user of another namespace
// creates on a node — a pod pinned there that can never run, a pod with
// a workload's share-key label — neither holds the workloads gated nor
// takes the room berth holds for their companions.
func TestPodsOfOtherNamespacesTakeNoRoom(t *testing.T) {
	ctx := context.Background()
	const ns, intruders = "roomowner", "intruder"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: intruders}},
		fuseProfile(ns, time.Minute))
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	pinnedTo := func(node string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}
	}
	// gatedOn creates a workload, annotated with its companion and
	// nominated to node.
	gatedOn := func(name, node string) *corev1.Pod {
		t.Helper()
		w := b.Pod(name, b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.Labels("app", ns))
		w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
		create(t, w)
		pass(t, r, w)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(w.DeepCopy())
		w.Status.NominatedNodeName = node
		if err := env.Client.Status().Patch(ctx, w, patch); err != nil {
			t.Fatal(err)
		}
		return w
	}
	gated := func(w *corev1.Pod) bool {
		t.Helper()
		pass(t, r, w)
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		return companion.Gated(got)
	}

	t.Run("an unschedulable pod of another namespace pinned to the node does not hold the workload gated", func(t *testing.T) {
		node := upNode(t, "pinned-node", "2", "8Gi")
		stuck := b.Pod("stuck", b.Namespace(intruders), b.NoUID(), b.CPU("3"), b.Labels("role", ns+"-companion"), b.RequireNodeAffinity(pinnedTo(node.Name)))
		create(t, stuck)
		// 500m + its 500m companion fit the 2-cpu node; the stuck pod's
		// 3 cpu would fit nowhere.
		if w := gatedOn("w-pinned", node.Name); gated(w) {
			t.Error("held gated by a pod of another namespace pinned to its node")
		}
	})

	t.Run("a pod of another namespace with the workload's share key neither shares its room nor keeps it", func(t *testing.T) {
		node := upNode(t, "sharekey-node", "4", "8Gi")
		w := gatedOn("w-sharekey", node.Name)
		key := w.Labels[v1alpha1.LabelCompanionShareKey]
		forged := b.Pod("forged", b.Namespace(intruders), b.NoUID(), b.CPU("100m"), b.Labels(v1alpha1.LabelCompanionShareKey, key))
		forged.Spec.NodeName = node.Name
		create(t, forged)
		if gated(w) {
			t.Fatal("still gated on a schedulable node with room")
		}
		phKey := client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: ctrlcompanion.PlaceholderName(key, node.Name)}
		ph := &corev1.Pod{}
		if err := env.Client.Get(ctx, phKey, ph); err != nil {
			t.Fatalf("no room held for the workload's companion, as if the other namespace's pod shared it: %v", err)
		}
		// Once the room is held on the node (the placeholder is bound next
		// to the workload), the workload goes: its room goes too, whatever
		// the other namespace's pod says.
		expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
			if err := env.Client.Get(ctx, phKey, ph); err != nil {
				return false, "", err
			}
			return ph.Spec.NodeName == node.Name, fmt.Sprintf("placeholder on %q", ph.Spec.NodeName), nil
		})
		if err := env.Client.Delete(ctx, w, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			if err := passErr(r, ph); err != nil {
				return false, "", err
			}
			err := env.Client.Get(ctx, phKey, &corev1.Pod{})
			return apierrors.IsNotFound(err), fmt.Sprintf("placeholder still there (%v)", err), client.IgnoreNotFound(err)
		})
	})
}
