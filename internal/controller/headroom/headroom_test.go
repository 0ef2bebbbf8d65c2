package headroom_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/headroom"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/state"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/fakes"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func reconciler() (*headroom.Reconciler, *state.Readiness, *fakes.Recorder) {
	ready := state.NewReadiness()
	ev := &fakes.Recorder{}
	return &headroom.Reconciler{Client: env.Client, Ready: ready, Recorder: ev, Clock: clock.RealClock{}}, ready, ev
}

func get(t *testing.T, name string) *v1alpha1.Headroom {
	t.Helper()
	h := &v1alpha1.Headroom{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, h); err != nil {
		t.Fatal(err)
	}
	return h
}

// reconcileOnce reconciles the Headroom, again after a conflict (the
// Deployment controller writes the placeholder Deployment too), as the
// controller's requeue does.
func reconcileOnce(t *testing.T, r *headroom.Reconciler, name string) {
	t.Helper()
	if err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func units(n int32) *v1alpha1.HeadroomUnits {
	return &v1alpha1.HeadroomUnits{Count: n, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func ensureNamespace(t *testing.T) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SystemNamespace}})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// TestPlaceholdersDeploymentIsStable: placeholders become a Deployment of
// the desired size with the scope's constraints, and reconciling again does
// not touch it (rewriting the defaulted template would restart them).
func TestPlaceholdersDeploymentIsStable(t *testing.T) {
	ensureNamespace(t)
	create(t, b.NodeGroup("ph-group", b.TemplateTaint("dedicated", "ph", corev1.TaintEffectNoSchedule)),
		&v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "ph"}, Spec: v1alpha1.HeadroomSpec{
			Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"ph-group"}}, Units: units(3), Placeholders: true}})
	r, _, _ := reconciler()
	reconcileOnce(t, r, "ph")
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "headroom-ph"}, d); err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if *d.Spec.Replicas != 3 || spec.PriorityClassName != v1alpha1.PriorityClassHeadroom || len(spec.Tolerations) != 1 ||
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "ph-group" {
		t.Errorf("deployment: replicas %d, class %q, tolerations %v, affinity %+v", *d.Spec.Replicas, spec.PriorityClassName, spec.Tolerations, spec.Affinity)
	}
	gen := d.Generation
	reconcileOnce(t, r, "ph")
	reconcileOnce(t, r, "ph")
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen {
		t.Errorf("reconciling twice more changed the placeholder Deployment (generation %d -> %d)", gen, d.Generation)
	}
	h := get(t, "ph")
	h.Spec.Units.Count = 5
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "ph")
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("replicas %d after raising the count to 5", *d.Spec.Replicas)
	}
	// Someone scales the Deployment by hand and gives its pods another
	// priority: berth puts back what it keeps (before, only a change of
	// its own spec did, and the Headroom said it kept 5 units).
	// The Deployment controller writes the object too (its revision):
	// a write may conflict, and is tried again, as the controller's
	// requeue does.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr[int32](0)
		d.Spec.Template.Spec.PriorityClassName = "system-cluster-critical"
		return env.Client.Update(context.Background(), d)
	}); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "ph")
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 5 || d.Spec.Template.Spec.PriorityClassName != v1alpha1.PriorityClassHeadroom {
		t.Errorf("after a hand edit: replicas %d, class %q; want 5 and %s back", *d.Spec.Replicas, d.Spec.Template.Spec.PriorityClassName, v1alpha1.PriorityClassHeadroom)
	}
	gen = d.Generation
	reconcileOnce(t, r, "ph")
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen {
		t.Errorf("reconciling once more after the repair changed the Deployment (generation %d -> %d)", gen, d.Generation)
	}
}

// TestPlaceholdersThatCannotBeCreatedAreReported: a ResourceQuota of
// berth-system allows no pod, so the placeholder Deployment's ReplicaSet
// cannot create any (the Deployment says so in its ReplicaFailure
// condition): the Headroom is not Ready for that reason, not "berth
// launches nodes for the rest" (no placeholder waits, nothing is
// launched).
func TestPlaceholdersThatCannotBeCreatedAreReported(t *testing.T) {
	ensureNamespace(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: v1alpha1.SystemNamespace},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	create(t, quota)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), quota) })
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "ph-quota"}, Spec: v1alpha1.HeadroomSpec{Units: units(2), Placeholders: true}})
	r, _, _ := reconciler()
	expect.Eventually(t, time.Minute, func(context.Context) (bool, string, error) {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "ph-quota"}}); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(get(t, "ph-quota").Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonPlaceholdersNotCreated && strings.Contains(c.Message, "quota"),
			fmt.Sprintf("Ready %+v, want False/%s naming the quota", c, v1alpha1.ReasonPlaceholdersNotCreated), nil
	})
}

// TestPlaceholdersOfADeviceUnitAreAdmitted: a unit that asks for a
// device (an extended resource, which the API server admits only with a
// limit equal to its request) gets placeholders whose pause container
// limits the device, and cpu and memory not at all.
func TestPlaceholdersOfADeviceUnitAreAdmitted(t *testing.T) {
	ensureNamespace(t)
	gpu := units(2)
	gpu.Resources["nvidia.com/gpu"] = resource.MustParse("1")
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "ph-gpu"}, Spec: v1alpha1.HeadroomSpec{Units: gpu, Placeholders: true}})
	r, _, _ := reconciler()
	reconcileOnce(t, r, "ph-gpu")
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "headroom-ph-gpu"}, d); err != nil {
		t.Fatalf("the placeholder Deployment of a unit with a GPU: %v", err)
	}
	want := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	if got := d.Spec.Template.Spec.Containers[0].Resources.Limits; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("placeholder limits %v, want %v (the device only)", got, want)
	}
}

// TestAPlaceholderTemplateTheAPIServerRefusesIsReported: the unit's
// toleration is one the API server refuses in a pod (operator Exists with
// a value); the Headroom's placeholders cannot be written. The Headroom
// says so in its Ready condition and an event, instead of failing every
// reconcile with its status unwritten.
func TestAPlaceholderTemplateTheAPIServerRefusesIsReported(t *testing.T) {
	ensureNamespace(t)
	bad := units(1)
	bad.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "ph-refused"}, Spec: v1alpha1.HeadroomSpec{Units: bad, Placeholders: true}})
	r, _, ev := reconciler()
	reconcileOnce(t, r, "ph-refused")
	c := meta.FindStatusCondition(get(t, "ph-refused").Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "placeholder Deployment") {
		t.Errorf("Ready condition %+v, want False, InvalidSpec, naming the placeholder Deployment the API server refused", c)
	}
	if !slices.ContainsFunc(ev.For("ph-refused"), func(e fakes.Event) bool { return e.Reason == headroom.ReasonInvalidSpec }) {
		t.Errorf("events %+v, want %s", ev.For("ph-refused"), headroom.ReasonInvalidSpec)
	}
}

// TestStatusFollowsReadinessAndRecordsTransitions: desired units and the
// ready count the provisioner reports become status and the Ready
// condition; dropping below and coming back record consumed and restored
// events; an invalid scope is reported, not crashed on.
func TestStatusFollowsReadinessAndRecordsTransitions(t *testing.T) {
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "st"}, Spec: v1alpha1.HeadroomSpec{Units: units(4)}})
	r, ready, ev := reconciler()
	key := state.HeadroomKey("st")
	steps := []struct {
		ready      int32
		wantStatus metav1.ConditionStatus
		wantEvent  string
	}{
		{4, metav1.ConditionTrue, ""},
		{1, metav1.ConditionFalse, headroom.ReasonConsumed},
		{4, metav1.ConditionTrue, headroom.ReasonRestored},
	}
	for i, s := range steps {
		ready.Set(map[state.Key]int32{key: s.ready})
		reconcileOnce(t, r, "st")
		h := get(t, "st")
		c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionReady)
		if h.Status.DesiredUnits != 4 || h.Status.ReadyUnits != s.ready || c == nil || c.Status != s.wantStatus {
			t.Errorf("step %d: desired %d ready %d condition %+v", i, h.Status.DesiredUnits, h.Status.ReadyUnits, c)
		}
		evs := ev.For("st")
		if s.wantEvent != "" && (len(evs) == 0 || evs[len(evs)-1].Reason != s.wantEvent) {
			t.Errorf("step %d: events %+v, want last %s", i, evs, s.wantEvent)
		}
	}

	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: v1alpha1.HeadroomSpec{
		Units: units(1), Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"missing"}}}})
	reconcileOnce(t, r, "bad")
	c := meta.FindStatusCondition(get(t, "bad").Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, `node group "missing" does not exist`) {
		t.Errorf("condition for a missing scope group: %+v", c)
	}
	// A Headroom that kept units, edited into a spec berth cannot read,
	// says that the last valid spec's units stay.
	h := get(t, "st")
	h.Spec.Scope.NodeGroups = []string{"missing"}
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "st")
	c = meta.FindStatusCondition(get(t, "st").Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "keeps the 4 units of the last valid spec") {
		t.Errorf("condition after an edit berth cannot read: %+v; want InvalidSpec saying the 4 units of the last valid spec stay", c)
	}
}

// TestAHeadroomOfNoUnitsIsReadyAndLeftAlone: a Headroom of 0 units (a
// perNode-only one, an automatic one whose workload is gone) is never
// planned for by the provisioner; it is Ready, saying it keeps nothing,
// and not looked at again every 2 seconds.
func TestAHeadroomOfNoUnitsIsReadyAndLeftAlone(t *testing.T) {
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Spec: v1alpha1.HeadroomSpec{Units: units(0)}})
	r, _, _ := reconciler() // the provisioner has planned nothing for it
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("requeued after %s, want not at all (nothing to wait for)", res.RequeueAfter)
	}
	c := meta.FindStatusCondition(get(t, "none").Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.Message != "the headroom keeps no units now" {
		t.Errorf("Ready condition %+v, want True: it keeps no units", c)
	}
}

// TestRestartKeepsReadyStatus: after a restart the provisioner has not
// planned yet. A headroom that was Ready stays Ready (no HeadroomConsumed
// event, no flap) until the first plan says otherwise.
func TestRestartKeepsReadyStatus(t *testing.T) {
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "restart"}, Spec: v1alpha1.HeadroomSpec{Units: units(2)}})
	before, ready, _ := reconciler()
	ready.Set(map[state.Key]int32{state.HeadroomKey("restart"): 2})
	reconcileOnce(t, before, "restart")
	if c := meta.FindStatusCondition(get(t, "restart").Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("before the restart: condition %+v, want Ready", c)
	}

	after, ready, ev := reconciler() // a new process: nothing planned yet
	reconcileOnce(t, after, "restart")
	h := get(t, "restart")
	if c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || h.Status.ReadyUnits != 2 {
		t.Errorf("right after the restart: ready units %d, condition %+v; want 2 and Ready", h.Status.ReadyUnits, c)
	}
	if evs := ev.For("restart"); len(evs) != 0 {
		t.Errorf("events right after the restart: %+v, want none", evs)
	}
	ready.Set(map[state.Key]int32{state.HeadroomKey("restart"): 1})
	reconcileOnce(t, after, "restart")
	if evs := ev.For("restart"); len(evs) != 1 || evs[0].Reason != headroom.ReasonConsumed {
		t.Errorf("events once the first plan fits 1 of 2: %+v, want one %s", evs, headroom.ReasonConsumed)
	}
}

// TestScheduleThatNeverFiresIsReported: the window of February 30th is
// ignored (the manual count stays), and the SpecProblems condition and an
// event say so.
func TestScheduleThatNeverFiresIsReported(t *testing.T) {
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "feb30"}, Spec: v1alpha1.HeadroomSpec{Units: units(1),
		Schedules: []v1alpha1.HeadroomSchedule{{Name: "never", Cron: "0 0 30 2 *", Duration: metav1.Duration{Duration: time.Hour},
			Units: v1alpha1.ScheduleUnits{Count: 5}}}}})
	r, _, ev := reconciler()
	reconcileOnce(t, r, "feb30")
	reconcileOnce(t, r, "feb30")
	h := get(t, "feb30")
	c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionSpecProblems)
	if h.Status.DesiredUnits != 1 || h.Status.ActiveSchedule != "" || c == nil || c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "spec.schedules[never].cron") {
		t.Errorf("desired %d, active %q, condition %+v; want 1, none, SpecProblems naming the schedule", h.Status.DesiredUnits, h.Status.ActiveSchedule, c)
	}
	if evs := ev.For("feb30"); len(evs) != 1 || evs[0].Reason != v1alpha1.ReasonSpecIgnored {
		t.Errorf("events %+v, want one %s (not one per reconcile)", evs, v1alpha1.ReasonSpecIgnored)
	}
}

// TestTargetSizesTheUnitsAndReportsTheWaits: a Headroom with a 5 s, 95 %
// target keeps spec.units' count while the learner knows nothing
// (phase Learning), then the learned estimate (phase Sized, 9 units,
// costing 9 x 0.10 an hour: the 4-cpu offering at 0.40 holds four
// 1-cpu units), capped by maxUnits 6 (phase Capped). The last hour's
// measured waits make TargetMet: 90 of 100 within 5 s misses 95 %.
func TestTargetSizesTheUnitsAndReportsTheWaits(t *testing.T) {
	create(t, b.NodeGroup("tgt", b.Size(0, 10), b.InstanceType("c4", "4", "8Gi", b.OnDemand("zone-a", "0.40"))),
		&v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "tgt"}, Spec: v1alpha1.HeadroomSpec{
			Units: units(2), Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"tgt"}},
			Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}}})
	r, _, ev := reconciler()
	targets := state.NewTargets()
	r.Targets = targets
	reconcileOnce(t, r, "tgt")
	h := get(t, "tgt")
	if h.Status.DesiredUnits != 2 || h.Status.Target == nil || h.Status.Target.Phase != v1alpha1.TargetLearning {
		t.Fatalf("before any history: desired %d, target %+v; want 2 units, Learning", h.Status.DesiredUnits, h.Status.Target)
	}

	targets.Set("tgt", state.Target{Window: time.Minute, Estimate: demand.Estimate{Units: 9, Known: true},
		LastHour: demand.Measured{Pods: 100, Within: 90, Quantile: 60}})
	reconcileOnce(t, r, "tgt")
	h = get(t, "tgt")
	ts := h.Status.Target
	if h.Status.DesiredUnits != 9 || ts == nil || ts.Phase != v1alpha1.TargetSized || ts.Units != 9 || ts.CostPerHour != "0.9000" {
		t.Errorf("sized: desired %d, target %+v; want 9 units, Sized, 0.9000 an hour", h.Status.DesiredUnits, ts)
	}
	c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionTargetMet)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTargetMissed || !strings.Contains(c.Message, "90.0 % of 100 pods") {
		t.Errorf("TargetMet after 90 of 100 within: %+v, want False/TargetMissed", c)
	}
	if evs := ev.For("tgt"); len(evs) == 0 || evs[len(evs)-1].Reason != headroom.ReasonTargetUnits {
		t.Errorf("events %+v, want a TargetUnits event for the change", evs)
	}

	h.Spec.Target.MaxUnits = ptr(int32(6))
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	targets.Set("tgt", state.Target{Window: time.Minute, Estimate: demand.Estimate{Units: 9, Known: true},
		LastHour: demand.Measured{Pods: 100, Within: 99, Quantile: 2}})
	reconcileOnce(t, r, "tgt")
	h = get(t, "tgt")
	if ts := h.Status.Target; h.Status.DesiredUnits != 6 || ts == nil || ts.Phase != v1alpha1.TargetCapped || !strings.Contains(ts.Message, "maxUnits 6") {
		t.Errorf("capped: desired %d, target %+v; want 6, Capped by maxUnits", h.Status.DesiredUnits, ts)
	}
	if c := meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionTargetMet); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("TargetMet after 99 of 100 within: %+v, want True", c)
	}
}

func ptr[T any](v T) *T { return &v }

// TestLearnedShapesAreKeptInStatus: the learner says 9 units of 1 cpu,
// 1Gi hold 95 % of all the demand and pods of 2 cpu, 2Gi need 2 of their
// units whole. Each such unit holds two of 1 cpu: status keeps 5 units
// of the Headroom's shape and 2 learned ones, desiredUnits 7, and the
// provisioner's readiness counts them all. With placeholders, the
// Deployment holds the 5 units of the Headroom's shape and the 2 learned
// ones stay virtual: ready counts the running placeholders (none here,
// no kubelet) and the learned units the plan fit.
func TestLearnedShapesAreKeptInStatus(t *testing.T) {
	ensureNamespace(t)
	create(t, b.NodeGroup("lrn", b.Size(0, 10), b.InstanceType("c4", "4", "8Gi", b.OnDemand("zone-a", "0.40"))),
		&v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "lrn"}, Spec: v1alpha1.HeadroomSpec{
			Units: units(2), Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"lrn"}},
			Target: &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95}}})
	r, ready, _ := reconciler()
	targets := state.NewTargets()
	r.Targets = targets
	two := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	targets.Set("lrn", state.Target{Window: time.Minute, Estimate: demand.Estimate{Units: 9, Known: true},
		Shapes: []demand.ShapeEstimate{{Shape: demand.ShapeOf(two), Estimate: demand.Estimate{Units: 2, Known: true}}}})
	ready.Set(map[state.Key]int32{state.HeadroomKey("lrn"): 7})
	reconcileOnce(t, r, "lrn")
	h := get(t, "lrn")
	want := []v1alpha1.LearnedUnits{{Resources: two, Count: 2}}
	if h.Status.DesiredUnits != 7 || h.Status.ReadyUnits != 7 || !equality.Semantic.DeepEqual(h.Status.LearnedUnits, want) {
		t.Fatalf("desired %d, ready %d, learned %+v; want 7, 7 and 2 units of 2 cpu, 2Gi", h.Status.DesiredUnits, h.Status.ReadyUnits, h.Status.LearnedUnits)
	}
	if ts := h.Status.Target; ts == nil || !strings.Contains(ts.Message, "pods of 2 cpu, 2Gi fits in 2 units of that shape: keeping 2; 5 running units") {
		t.Errorf("target status %+v does not explain the learned units", ts)
	}

	h.Spec.Placeholders = true
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	ready.Set(map[state.Key]int32{state.HeadroomKey("lrn"): 2})
	reconcileOnce(t, r, "lrn")
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "headroom-lrn"}, d); err != nil {
		t.Fatal(err)
	}
	if h = get(t, "lrn"); *d.Spec.Replicas != 5 || h.Status.DesiredUnits != 7 || h.Status.ReadyUnits != 2 {
		t.Errorf("placeholders %d, desired %d, ready %d; want 5 placeholders, 7 desired, 2 ready (the learned units)", *d.Spec.Replicas, h.Status.DesiredUnits, h.Status.ReadyUnits)
	}
}

// TestAutomaticHeadroomCountsTheWorkloadInScope: 50 % of the cpu the pods
// on the scope's nodes request, in units of 1 cpu: 4 pods of 1 cpu in
// scope give 2 units; a pod on a node of another group does not count.
func TestAutomaticHeadroomCountsTheWorkloadInScope(t *testing.T) {
	create(t, b.NodeGroup("auto-in"), b.NodeGroup("auto-out"),
		b.Node("auto-in-1", "8", "32Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "auto-in")),
		b.Node("auto-out-1", "8", "32Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "auto-out")))
	for i, node := range []string{"auto-in-1", "auto-in-1", "auto-in-1", "auto-in-1", "auto-out-1", "auto-out-1"} {
		p := b.Pod(fmt.Sprintf("auto-%d", i), b.CPU("1"), b.NodeName(node))
		p.UID = ""
		create(t, p)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	}
	create(t, &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "auto"}, Spec: v1alpha1.HeadroomSpec{
		Scope:     v1alpha1.HeadroomScope{NodeGroups: []string{"auto-in"}},
		Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 50, Unit: &v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}})
	r, _, _ := reconciler()
	reconcileOnce(t, r, "auto")
	if got := get(t, "auto").Status.DesiredUnits; got != 2 {
		t.Errorf("desired units %d, want 2 (50 %% of the 4 cpu requested in scope)", got)
	}
}

// TestPlaceholdersAndReservesRunTheConfiguredPauseImage: a cluster that
// cannot pull from registry.k8s.io sets --pause-image to its mirror; the
// Headroom's placeholder pods and its per-node reserve pods run it (they
// ran registry.k8s.io's image whatever the flag said, and never started).
func TestPlaceholdersAndReservesRunTheConfiguredPauseImage(t *testing.T) {
	ensureNamespace(t)
	const mirror = "mirror.example.com/pause:3.10"
	create(t, b.NodeGroup("pi-group"),
		&v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "pi"}, Spec: v1alpha1.HeadroomSpec{
			Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"pi-group"}}, Units: units(1), Placeholders: true,
			PerNode: &v1alpha1.PerNodeReserve{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}})
	r, _, _ := reconciler()
	r.PauseImage = mirror
	reconcileOnce(t, r, "pi")
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "headroom-pi"}, d); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "node-reserve-pi"}, ds); err != nil {
		t.Fatal(err)
	}
	for what, spec := range map[string]corev1.PodSpec{"placeholder": d.Spec.Template.Spec, "node reserve": ds.Spec.Template.Spec} {
		if got := spec.Containers[0].Image; got != mirror {
			t.Errorf("%s pods run %s, want %s", what, got, mirror)
		}
	}
}
