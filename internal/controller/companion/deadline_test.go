package companion_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	ctrlcompanion "github.com/berth-dev/berth/internal/controller/companion"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

// refusingPlaceholders is a client whose placeholders the API server
// refuses (a quota, an admission policy in berth-system).
type refusingPlaceholders struct{ client.Client }

func (c refusingPlaceholders) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetNamespace() == v1alpha1.SystemNamespace {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("exceeded quota"))
	}
	return c.Client.Create(ctx, obj, opts...)
}

// unreadableNamespaces is a client that cannot read Namespaces (a
// profile's namespaceSelector cannot be evaluated).
type unreadableNamespaces struct{ client.Client }

func (c unreadableNamespaces) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Namespace); ok {
		return errors.New("namespaces cannot be read")
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestAGateIsNeverHeldPastUngateAfter: whatever fails on the way — the
// companion size on the pod cannot be read, the placeholder is refused,
// which profile selects the pod cannot be told — the gate goes at the
// profile's ungateAfter at the latest (at once when the pod has no
// companion berth can plan), with an event saying why no room was held.
func TestAGateIsNeverHeldPastUngateAfter(t *testing.T) {
	const ns = "deadline"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"companions": "on"}}}, fuseProfile(ns, 5*time.Second))
	byNamespace := fuseProfile(ns+"-by-ns", 5*time.Second)
	byNamespace.Spec.Workloads.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"companions": "on"}}
	create(t, byNamespace)
	node := upNode(t, "deadline-node", "4", "8Gi")

	for i, tc := range []struct {
		name string
		// app selects the profile; annotation is the companion size on
		// the pod ("" for none yet).
		app, annotation string
		nominated       bool
		wrap            func(client.Client) client.Client
		late            bool
		wantGated       bool
		wantEvent       string
	}{
		{name: "a workload whose companion size is not a resource list is ungated at once",
			app: ns, annotation: "cpu=500m", nominated: true, wantEvent: "companion's size cannot be read"},
		{name: "past the deadline, a workload nominated to a node whose companion size cannot be read is ungated",
			app: ns, annotation: `{"cpu":"lots"}`, nominated: true, late: true, wantEvent: "companion's size cannot be read"},
		{name: "a workload whose companion size is negative is ungated at once",
			app: ns, annotation: `{"cpu":"-1"}`, wantEvent: "companion's size cannot be read"},
		{name: "past the deadline, a placeholder the API server refuses does not keep the gate",
			app: ns, annotation: `{"cpu":"500m"}`, nominated: true, late: true,
			wrap: func(c client.Client) client.Client { return refusingPlaceholders{c} }, wantEvent: "exceeded quota"},
		{name: "before the deadline, a refused placeholder keeps the gate and is tried again",
			app: ns, annotation: `{"cpu":"500m"}`, nominated: true,
			wrap: func(c client.Client) client.Client { return refusingPlaceholders{c} }, wantGated: true},
		{name: "past the deadline, a workload whose profile cannot be told is ungated",
			app: byNamespace.Name, late: true,
			wrap: func(c client.Client) client.Client { return unreadableNamespaces{c} }, wantEvent: "could not be told"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := b.Pod(fmt.Sprintf("w-%d", i), b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.Labels("app", tc.app))
			w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
			if tc.annotation != "" {
				w.Labels[v1alpha1.LabelCompanionShareKey] = w.Name
				w.Annotations = map[string]string{v1alpha1.AnnotationCompanionRequests: tc.annotation}
			}
			create(t, w)
			if tc.nominated {
				patch := client.MergeFrom(w.DeepCopy())
				w.Status.NominatedNodeName = node.Name
				if err := env.Client.Status().Patch(ctx, w, patch); err != nil {
					t.Fatal(err)
				}
			}
			c := env.Client
			if tc.wrap != nil {
				c = tc.wrap(c)
			}
			now := time.Now()
			if tc.late {
				now = now.Add(6 * time.Second)
			}
			rec := &fakes.Recorder{}
			r := &ctrlcompanion.Reconciler{Client: c, Recorder: rec, Clock: clocktesting.NewFakeClock(now), PauseImage: "pause"}
			err := passErr(r, w)
			got := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
				t.Fatal(err)
			}
			if companion.Gated(got) != tc.wantGated {
				t.Fatalf("gated %v after the pass (error %v), want %v; events %+v", companion.Gated(got), err, tc.wantGated, rec.Events)
			}
			if tc.wantGated && err == nil {
				t.Error("the failed step was not reported for a retry")
			}
			if tc.wantEvent != "" && !slices.ContainsFunc(rec.Events, func(e fakes.Event) bool {
				return e.Reason == ctrlcompanion.ReasonSkipped && strings.Contains(e.Message, tc.wantEvent)
			}) {
				t.Errorf("no %s event saying %q: %+v", ctrlcompanion.ReasonSkipped, tc.wantEvent, rec.Events)
			}
		})
	}
}

// TestABrokenProfileDoesNotHoldOtherWorkloads: a profile whose selector
// berth's code rejects (the API server accepts a label key with a space)
// selects no pod and gets a warning; the workloads of the other profiles
// are gated and handled as before, not held by its error.
func TestABrokenProfileDoesNotHoldOtherWorkloads(t *testing.T) {
	const ns = "brokenprofile"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	// Named to be tried first.
	broken := fuseProfile("a-broken", time.Minute)
	broken.Spec.Workloads.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app name", Operator: metav1.LabelSelectorOpExists}}}
	create(t, broken)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), broken) })

	rec := &fakes.Recorder{}
	pr := &ctrlcompanion.ProfileReconciler{Client: env.Client, Recorder: rec, Sync: func(context.Context, bool) error { return nil }}
	if _, err := pr.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(broken)}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rec.Events, func(e fakes.Event) bool {
		return e.Reason == ctrlcompanion.ReasonProfileInvalid && strings.Contains(e.Message, "spec.workloads.podSelector")
	}) {
		t.Errorf("no %s warning naming the selector on the broken profile: %+v", ctrlcompanion.ReasonProfileInvalid, rec.Events)
	}

	w := b.Pod("w", b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.Labels("app", ns))
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	create(t, w)
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: rec, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	pass(t, r, w)
	got := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[v1alpha1.AnnotationCompanionRequests] == "" || !companion.Gated(got) {
		t.Errorf("the workload of a valid profile was not annotated and kept gated: annotations %v, gates %v", got.Annotations, got.Spec.SchedulingGates)
	}
}

// TestAHandoverGateWithoutANodeIsReleased: berth's hand-over gate on a pod
// that is neither bound nor pinned to a node (put there by hand) has no
// room to wait for: it goes in the first pass.
func TestAHandoverGateWithoutANodeIsReleased(t *testing.T) {
	const ns = "handover-nonode"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, time.Minute))
	c := b.Pod("c", b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.Labels("role", ns+"-companion"))
	c.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanionHandover}}
	create(t, c)
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clocktesting.NewFakeClock(time.Now()), PauseImage: "pause"}
	pass(t, r, c)
	got := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if companion.HandoverGated(got) {
		t.Errorf("a companion with no node is still held back: gates %v", got.Spec.SchedulingGates)
	}
}

// TestAnotherGateHoldsTheClock: a workload created with a queue's gate
// beside berth's (Kueue admits it later) is held by that gate, not by
// berth: past ungateAfter since its creation berth's gate stays while the
// queue's does, and ungateAfter counts from the moment berth's gate is
// the only one. Before, berth removed its gate at ungateAfter after the
// creation, with no room held, and the pod was planned without its
// companion once the queue admitted it.
func TestAnotherGateHoldsTheClock(t *testing.T) {
	ctx := context.Background()
	const ns = "queued"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, 5*time.Second))
	w := b.Pod("w", b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.Labels("app", ns))
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}, {Name: v1alpha1.SchedulingGateCompanion}}
	create(t, w)
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Minute)) // past ungateAfter since the creation
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clk, PauseImage: "pause"}
	get := func() *corev1.Pod {
		t.Helper()
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	pass(t, r, w)
	if !companion.Gated(get()) {
		t.Fatal("berth's gate went while the queue's gate held the pod")
	}
	// The queue admits the pod: its gate goes.
	admitted := get()
	patch := client.MergeFrom(admitted.DeepCopy())
	admitted.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	if err := env.Client.Patch(ctx, admitted, patch); err != nil {
		t.Fatal(err)
	}
	pass(t, r, w)
	got := get()
	if !companion.Gated(got) {
		t.Fatal("berth's gate went at once when the queue's went: ungateAfter counts from then")
	}
	if got.Annotations[v1alpha1.AnnotationCompanionGateSince] == "" {
		t.Errorf("annotations %v, want %s stamped", got.Annotations, v1alpha1.AnnotationCompanionGateSince)
	}
	clk.Step(6 * time.Second)
	pass(t, r, w)
	if companion.Gated(get()) {
		t.Error("berth's gate is still there ungateAfter after the queue's went")
	}
}

// TestAGateStartInTheFutureIsNotTrusted: a pod created with a
// gate-since stamp berth did not write (far in the future: a template
// copied from another pod, a clock ahead) is held from now, not until
// then: the gate goes ungateAfter later at the latest.
func TestAGateStartInTheFutureIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	const ns = "future-stamp"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, fuseProfile(ns, 5*time.Second))
	w := b.Pod("w", b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.Labels("app", ns))
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	w.Annotations = map[string]string{v1alpha1.AnnotationCompanionGateSince: "2099-01-01T00:00:00Z"}
	create(t, w)
	clk := clocktesting.NewFakeClock(time.Now())
	r := &ctrlcompanion.Reconciler{Client: env.Client, Recorder: &fakes.Recorder{}, Clock: clk, PauseImage: "pause"}
	pass(t, r, w)
	clk.Step(6 * time.Second)
	pass(t, r, w)
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
		t.Fatal(err)
	}
	if companion.Gated(got) {
		t.Errorf("still gated ungateAfter after berth first saw it (gate-since %s)", got.Annotations[v1alpha1.AnnotationCompanionGateSince])
	}
}
