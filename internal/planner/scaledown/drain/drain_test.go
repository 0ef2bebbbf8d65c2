package drain_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// owner sets a controller owner reference of the given API version.
func owner(apiVersion, kind, name string) b.PodOption {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
	}
}

// deleted marks the pod deleted ago before now, with a grace period.
func deleted(ago time.Duration, grace *int64) b.PodOption {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-ago)}
		p.Spec.TerminationGracePeriodSeconds = grace
	}
}

func hostPath(name string) b.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}})
	}
}

func memoryDir(name string) b.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	}
}

func pdb(namespace string, allowed int32, matchLabels ...string) *policyv1.PodDisruptionBudget {
	sel := map[string]string{}
	for i := 0; i+1 < len(matchLabels); i += 2 {
		sel[matchLabels[i]] = matchLabels[i+1]
	}
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: namespace},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

type ruleCase struct {
	name string
	pod  *corev1.Pod
	ctx  drain.Context
	want drain.Verdict
	// reason, if set, is the reason of a block (else the rule's own).
	reason drain.Reason
}

func runRule(t *testing.T, r drain.Rule, cases []ruleCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx.PDBs == nil {
				ctx.PDBs = drain.NewBudgets(nil)
			}
			got := r.Check(tt.pod, &ctx)
			if got.Verdict != tt.want {
				t.Errorf("verdict %v (%s), want %v", got.Verdict, got.Message, tt.want)
			}
			want := tt.reason
			if want == "" {
				want = r.Name()
			}
			if got.Verdict == drain.Blocks && got.Reason != want {
				t.Errorf("blocked with reason %s, want %s", got.Reason, want)
			}
		})
	}
}

const (
	undecided = drain.Undecided
	stays     = drain.Stays
	moves     = drain.Moves
	blocks    = drain.Blocks
)

func TestGoesWithNode(t *testing.T) {
	at := drain.Context{Now: now}
	runRule(t, drain.GoesWithNode{}, []ruleCase{
		{name: "a regular pod is not decided", pod: b.Pod("web", owner("apps/v1", "ReplicaSet", "rs")), ctx: at, want: undecided},
		{name: "a DaemonSet pod goes with its node", pod: b.Pod("agent", owner("apps/v1", "DaemonSet", "ds")), ctx: at, want: stays},
		{name: "a pod of a DaemonSet of another API group goes with its node", pod: b.Pod("agent", owner("crd.example/v1", "DaemonSet", "ds")), ctx: at, want: stays},
		{name: "a pod annotated daemonset-pod goes with its node", pod: b.Pod("agent", owner("example/v1", "NodeAgent", "x"), b.Annotation("cluster-autoscaler.kubernetes.io/daemonset-pod", "true")), ctx: at, want: stays},
		{name: "daemonset-pod other than true is not decided", pod: b.Pod("agent", b.Annotation("cluster-autoscaler.kubernetes.io/daemonset-pod", "yes")), ctx: at, want: undecided},
		{name: "a mirror pod goes with its node", pod: b.Pod("static", b.Annotation(corev1.MirrorPodAnnotationKey, "")), ctx: at, want: stays},
		{name: "a succeeded pod goes with its node", pod: b.Pod("job", b.Phase(corev1.PodSucceeded)), ctx: at, want: stays},
		{name: "a failed pod goes with its node", pod: b.Pod("job", b.Phase(corev1.PodFailed)), ctx: at, want: stays},
		{name: "a pod just deleted is not decided (it still runs)", pod: b.Pod("web", deleted(10*time.Second, nil)), ctx: at, want: undecided},
		{name: "a pod deleted past its default grace plus 30 s goes with its node", pod: b.Pod("web", deleted(61*time.Second, nil)), ctx: at, want: stays},
		{name: "a pod deleted for less than its long grace period is not decided", pod: b.Pod("web", deleted(3*time.Minute, ptr.To[int64](360))), ctx: at, want: undecided},
		{name: "a pod deleted past its long grace period goes with its node", pod: b.Pod("web", deleted(7*time.Minute, ptr.To[int64](360))), ctx: at, want: stays},
		{name: "a pod deleted with grace 0 goes 30 s later", pod: b.Pod("web", deleted(31*time.Second, ptr.To[int64](0))), ctx: at, want: stays},
		{name: "without a clock no pod counts as long terminating", pod: b.Pod("web", deleted(time.Hour, nil)), want: undecided},
	})
}

func TestDoNotDisrupt(t *testing.T) {
	at := drain.Context{Now: now}
	runRule(t, drain.DoNotDisrupt{}, []ruleCase{
		{name: "a regular pod is not decided", pod: b.Pod("web"), want: undecided},
		{name: "berth's annotation blocks", pod: b.Pod("web", b.Annotation("berth.dev/do-not-disrupt", "true")), want: blocks},
		{name: "Karpenter's annotation blocks", pod: b.Pod("web", b.Annotation("karpenter.sh/do-not-disrupt", "true")), want: blocks},
		{name: "Ocean's label blocks", pod: b.Pod("web", b.Labels("spotinst.io/restrict-scale-down", "true")), want: blocks},
		{name: "a value other than true does not block", pod: b.Pod("web", b.Annotation("berth.dev/do-not-disrupt", "false")), want: undecided},
		{name: "a duration blocks while the pod has run for less", pod: b.Pod("batch", started(time.Minute), b.Annotation("karpenter.sh/do-not-disrupt", "1h")), ctx: at, want: blocks},
		{name: "a duration of berth's annotation blocks too", pod: b.Pod("batch", started(time.Minute), b.Annotation("berth.dev/do-not-disrupt", "30m")), ctx: at, want: blocks},
		{name: "a duration the pod has run for no longer blocks", pod: b.Pod("batch", started(2*time.Hour), b.Annotation("karpenter.sh/do-not-disrupt", "1h")), ctx: at, want: undecided},
		{name: "a duration blocks a pod not started yet", pod: b.Pod("batch", b.Annotation("karpenter.sh/do-not-disrupt", "1h")), ctx: at, want: blocks},
		{name: "a duration blocks when the time is not known", pod: b.Pod("batch", started(2*time.Hour), b.Annotation("karpenter.sh/do-not-disrupt", "1h")), want: blocks},
		{name: "a negative duration does not block", pod: b.Pod("batch", started(time.Minute), b.Annotation("karpenter.sh/do-not-disrupt", "-1h")), ctx: at, want: undecided},
	})
}

// started sets the pod's start time ago before now.
func started(ago time.Duration) b.PodOption {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: now.Add(-ago)} }
}

func TestControllerExists(t *testing.T) {
	exist := drain.Context{Controllers: map[types.UID]bool{"uid-here": true}}
	runRule(t, drain.ControllerExists{}, []ruleCase{
		{name: "a pod of a ReplicaSet that exists is not decided", pod: b.Pod("web", owner("apps/v1", "ReplicaSet", "here")), ctx: exist, want: undecided},
		{name: "a pod of a ReplicaSet that is gone blocks", pod: b.Pod("web", owner("apps/v1", "ReplicaSet", "gone")), ctx: exist, want: blocks},
		{name: "a pod of a Job that is gone blocks", pod: b.Pod("job", owner("batch/v1", "Job", "gone")), ctx: exist, want: blocks},
		{name: "a pod of a StatefulSet that is gone blocks", pod: b.Pod("db", owner("apps/v1", "StatefulSet", "gone")), ctx: exist, want: blocks},
		{name: "a pod of a ReplicationController that is gone blocks", pod: b.Pod("old", owner("v1", "ReplicationController", "gone")), ctx: exist, want: blocks},
		{name: "a pod of a custom controller is not checked", pod: b.Pod("x", owner("kruise.io/v1", "StatefulSet", "gone")), ctx: exist, want: undecided},
		{name: "a bare pod is left to NotReplicated", pod: b.Pod("bare"), ctx: exist, want: undecided},
		{name: "without the controllers known the rule is off", pod: b.Pod("web", owner("apps/v1", "ReplicaSet", "gone")), want: undecided},
	})
}

func TestSafeToEvict(t *testing.T) {
	const key = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	closed := drain.Context{PDBs: drain.NewBudgets([]*policyv1.PodDisruptionBudget{pdb("default", 0, "app", "web")})}
	runRule(t, drain.SafeToEvict{}, []ruleCase{
		{name: "no annotation is not decided", pod: b.Pod("web"), want: undecided},
		{name: "true moves", pod: b.Pod("web", b.Annotation(key, "true")), want: moves},
		{name: "true still waits for a budget that allows nothing", pod: b.Pod("web", b.Labels("app", "web"), b.Annotation(key, "true")), ctx: closed, want: blocks, reason: drain.ReasonPDB},
		{name: "false blocks", pod: b.Pod("web", b.Annotation(key, "false")), want: blocks},
		{name: "on-completion blocks while the pod runs", pod: b.Pod("web", b.Annotation(key, "on-completion")), want: blocks},
		{name: "another value is not decided", pod: b.Pod("web", b.Annotation(key, "maybe")), want: undecided},
	})
}

func TestNotReplicated(t *testing.T) {
	runRule(t, drain.NotReplicated{}, []ruleCase{
		{name: "a bare pod blocks", pod: b.Pod("bare"), want: blocks},
		{name: "a pod with an owner that is not its controller blocks", pod: b.Pod("x", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u"}}
		}), want: blocks},
		{name: "a ReplicaSet's pod is not decided", pod: b.Pod("web", owner("apps/v1", "ReplicaSet", "rs")), want: undecided},
		{name: "a custom controller's pod counts as replicated", pod: b.Pod("x", owner("example.com/v1", "Foo", "f")), want: undecided},
	})
}

func TestLocalStorage(t *testing.T) {
	const key = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	runRule(t, drain.LocalStorage{}, []ruleCase{
		{name: "an emptyDir on disk blocks", pod: b.Pod("p", b.EmptyDir("scratch")), want: blocks},
		{name: "a hostPath blocks", pod: b.Pod("p", hostPath("logs")), want: blocks},
		{name: "an emptyDir in memory does not block", pod: b.Pod("p", memoryDir("tmp")), want: undecided},
		{name: "the volume listed as safe to evict does not block", pod: b.Pod("p", b.EmptyDir("scratch"), b.Annotation(key, "scratch")), want: undecided},
		{name: "an empty list blocks", pod: b.Pod("p", b.EmptyDir("scratch"), b.Annotation(key, "")), want: blocks},
		{name: "another volume's name blocks", pod: b.Pod("p", b.EmptyDir("scratch-1"), b.Annotation(key, "scratch-2")), want: blocks},
		{name: "every local volume listed does not block", pod: b.Pod("p", b.EmptyDir("a"), hostPath("b"), b.EmptyDir("c"), b.Annotation(key, "a,b,c")), want: undecided},
		{name: "one local volume not listed blocks", pod: b.Pod("p", b.EmptyDir("a"), hostPath("b"), b.EmptyDir("c"), b.Annotation(key, "a,b")), want: blocks},
		{name: "names are matched exactly (no trimming)", pod: b.Pod("p", b.EmptyDir("a"), b.EmptyDir("b"), b.Annotation(key, "a, b")), want: blocks},
		{name: "only commas blocks", pod: b.Pod("p", b.EmptyDir("a"), b.Annotation(key, ",")), want: blocks},
	})
}

func TestSystemPodWithoutPDB(t *testing.T) {
	sys := func(o ...b.PodOption) *corev1.Pod {
		return b.Pod("dns", append([]b.PodOption{b.Namespace("kube-system"), b.Labels("k8s-app", "dns")}, o...)...)
	}
	covered := drain.Context{PDBs: drain.NewBudgets([]*policyv1.PodDisruptionBudget{pdb("kube-system", 0, "k8s-app", "dns")})}
	elsewhere := drain.Context{PDBs: drain.NewBudgets([]*policyv1.PodDisruptionBudget{pdb("default", 1, "k8s-app", "dns")})}
	runRule(t, drain.SystemPodWithoutPDB{}, []ruleCase{
		{name: "a kube-system pod without a PDB blocks", pod: sys(), want: blocks},
		{name: "a kube-system pod with a PDB is left to the budget", pod: sys(), ctx: covered, want: undecided},
		{name: "a PDB of another namespace does not cover it", pod: sys(), ctx: elsewhere, want: blocks},
		{name: "an old kube-system pod without a PDB still blocks", pod: sys(func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{Time: now.Add(-48 * time.Hour)} }), want: blocks},
		{name: "a pod of another namespace is not decided", pod: b.Pod("web"), want: undecided},
	})
}

func TestDisruptionBudget(t *testing.T) {
	ctx := func(allowed int32, ns string, labels ...string) drain.Context {
		return drain.Context{PDBs: drain.NewBudgets([]*policyv1.PodDisruptionBudget{pdb(ns, allowed, labels...)})}
	}
	runRule(t, drain.DisruptionBudget{}, []ruleCase{
		{name: "no budget is not decided", pod: b.Pod("web", b.Labels("app", "web")), want: undecided},
		{name: "a budget that allows one is not decided", pod: b.Pod("web", b.Labels("app", "web")), ctx: ctx(1, "default", "app", "web"), want: undecided},
		{name: "a budget that allows none blocks", pod: b.Pod("web", b.Labels("app", "web")), ctx: ctx(0, "default", "app", "web"), want: blocks},
		{name: "a budget of another namespace does not apply", pod: b.Pod("web", b.Labels("app", "web")), ctx: ctx(0, "other", "app", "web"), want: undecided},
		{name: "a budget of other labels does not apply", pod: b.Pod("web", b.Labels("app", "web")), ctx: ctx(0, "default", "app", "db"), want: undecided},
		// The Eviction API's rules for pods the budget does not guard.
		{name: "a pod not started yet is evicted whatever the budget", pod: b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodPending)), ctx: ctx(0, "default", "app", "web"), want: undecided},
		{name: "a pod not started yet is evicted even under two budgets", pod: b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodPending)), ctx: drain.Context{PDBs: drain.NewBudgets([]*policyv1.PodDisruptionBudget{
			pdb("default", 1, "app", "web"), pdb("default", 1, "app", "web")})}, want: undecided},
		{name: "an unready pod under AlwaysAllow is evicted whatever the budget", pod: b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodRunning), ready(false)),
			ctx: budgetOf(0, 3, 3, ptr.To(policyv1.AlwaysAllow)), want: undecided},
		{name: "a ready pod under AlwaysAllow is held by a budget that allows none", pod: b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodRunning), ready(true)),
			ctx: budgetOf(0, 3, 3, ptr.To(policyv1.AlwaysAllow)), want: blocks},
		{name: "an unready pod is evicted while the budget has its healthy pods", pod: b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodRunning), ready(false)),
			ctx: budgetOf(0, 3, 3, nil), want: undecided},
		{name: "an unready pod is held while the budget lacks healthy pods", pod: b.Pod("web", b.Labels("app", "web"), b.Phase(corev1.PodRunning), ready(false)),
			ctx: budgetOf(0, 2, 3, ptr.To(policyv1.IfHealthyBudget)), want: blocks},
	})
}

// ready sets the pod's Ready condition.
func ready(yes bool) b.PodOption {
	return func(p *corev1.Pod) {
		st := corev1.ConditionFalse
		if yes {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: st})
	}
}

// budgetOf is a budget of app=web allowing allowed disruptions, with
// currentHealthy and desiredHealthy and the unhealthy-pod policy.
func budgetOf(allowed, current, desired int32, policy *policyv1.UnhealthyPodEvictionPolicyType) drain.Context {
	p := pdb("default", allowed, "app", "web")
	p.Status.CurrentHealthy, p.Status.DesiredHealthy = current, desired
	p.Spec.UnhealthyPodEvictionPolicy = policy
	return drain.Context{PDBs: drain.NewBudgets([]*policyv1.PodDisruptionBudget{p})}
}

// TestUnhealthyPodsSpendNoDisruption: the pods the Eviction API evicts
// without a disruption of their budget do not spend one in the plan: a
// budget allowing one disruption takes a node's unready pods and one
// ready pod, and no second ready pod.
func TestUnhealthyPodsSpendNoDisruption(t *testing.T) {
	budgets := budgetOf(1, 3, 3, ptr.To(policyv1.AlwaysAllow)).PDBs
	sick := func(name string) *corev1.Pod {
		return b.Pod(name, b.Labels("app", "web"), b.Phase(corev1.PodRunning), ready(false))
	}
	well := func(name string) *corev1.Pod {
		return b.Pod(name, b.Labels("app", "web"), b.Phase(corev1.PodRunning), ready(true))
	}
	if err := budgets.Take([]*corev1.Pod{sick("s1"), sick("s2"), well("w1")}); err != nil {
		t.Fatalf("two unready pods and one ready pod refused: %v", err)
	}
	if err := budgets.Take([]*corev1.Pod{sick("s3")}); err != nil {
		t.Errorf("an unready pod refused once the budget is spent: %v", err)
	}
	if err := budgets.Take([]*corev1.Pod{well("w2")}); err == nil {
		t.Error("a second ready pod taken from a budget allowing one disruption")
	}
}

// TestBudgetsWithoutUIDs: hand-written budgets (berth plan) carry no UID;
// two of them are still two budgets.
func TestBudgetsWithoutUIDs(t *testing.T) {
	web, db := pdb("default", 1, "app", "web"), pdb("default", 1, "app", "db")
	web.Name, db.Name = "web", "db"
	budgets := drain.NewBudgets([]*policyv1.PodDisruptionBudget{web, db})
	if err := budgets.Take([]*corev1.Pod{b.Pod("w", b.Labels("app", "web"))}); err != nil {
		t.Fatal(err)
	}
	if err := budgets.Take([]*corev1.Pod{b.Pod("d", b.Labels("app", "db"))}); err != nil {
		t.Errorf("db's budget was spent by web's eviction: %v", err)
	}
	if err := budgets.Take([]*corev1.Pod{b.Pod("w2", b.Labels("app", "web"))}); err == nil {
		t.Error("web's budget allowed a second eviction")
	}
}

// TestChainPrecedence: the order of the rules decides.
func TestChainPrecedence(t *testing.T) {
	const safe = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	ctx := &drain.Context{Now: now, PDBs: drain.NewBudgets(nil), Controllers: map[types.UID]bool{"uid-rs": true}}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		want   drain.Verdict
		reason drain.Reason
	}{
		{name: "safe-to-evict lets a bare pod move", pod: b.Pod("bare", b.Annotation(safe, "true")), want: moves},
		{name: "safe-to-evict lets local storage move", pod: b.Pod("p", owner("apps/v1", "ReplicaSet", "rs"), b.EmptyDir("x"), b.Annotation(safe, "true")), want: moves},
		{name: "safe-to-evict lets a kube-system pod without a PDB move", pod: b.Pod("dns", b.Namespace("kube-system"), owner("apps/v1", "ReplicaSet", "rs"), b.Annotation(safe, "true")), want: moves},
		{name: "safe-to-evict does not lift a missing controller", pod: b.Pod("p", owner("apps/v1", "ReplicaSet", "gone"), b.Annotation(safe, "true")), want: blocks, reason: drain.ReasonControllerNotFound},
		{name: "do-not-disrupt wins over safe-to-evict", pod: b.Pod("p", b.Annotation(safe, "true"), b.Annotation("berth.dev/do-not-disrupt", "true")), want: blocks, reason: drain.ReasonDoNotDisrupt},
		{name: "a DaemonSet pod with local storage goes with its node", pod: b.Pod("ds", owner("apps/v1", "DaemonSet", "ds"), hostPath("logs")), want: stays},
		{name: "a long-terminating bare pod goes with its node", pod: b.Pod("bare", deleted(time.Hour, nil)), want: stays},
		{name: "a recently deleted bare pod moves: it leaves anyway, the node waits for it", pod: b.Pod("bare", deleted(5*time.Second, nil)), want: moves, reason: drain.ReasonTerminating},
		{name: "a pod shutting down whose ReplicaSet was deleted moves", pod: b.Pod("p", owner("apps/v1", "ReplicaSet", "gone"), deleted(5*time.Second, nil)), want: moves, reason: drain.ReasonTerminating},
		{name: "a pod shutting down with local storage and safe-to-evict false moves", pod: b.Pod("p", owner("apps/v1", "ReplicaSet", "rs"), b.EmptyDir("x"), b.Annotation(safe, "false"), deleted(5*time.Second, nil)), want: moves, reason: drain.ReasonTerminating},
		{name: "a bare kube-system pod is reported as not replicated", pod: b.Pod("bare", b.Namespace("kube-system")), want: blocks, reason: drain.ReasonNotReplicated},
		{name: "a replicated pod with nothing special moves", pod: b.Pod("web", owner("apps/v1", "ReplicaSet", "rs")), want: moves},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := drain.Check(drain.Rules(), tt.pod, ctx)
			if got.Verdict != tt.want || (tt.reason != "" && got.Reason != tt.reason) {
				t.Errorf("got %v %s (%s), want %v %s", got.Verdict, got.Reason, got.Message, tt.want, tt.reason)
			}
		})
	}
}

// TestBudgetsMatchWhatTheirSelectorsSelect: Budgets files PDBs by one of
// their labels to check a pod only against its own; on random pods and
// PDBs (matchLabels of one or two labels, matchExpressions, other
// namespaces) Matching returns exactly the PDBs whose namespace and
// selector select the pod, in the order given.
func TestBudgetsMatchWhatTheirSelectorsSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	for round := range 200 {
		var pdbs []*policyv1.PodDisruptionBudget
		for i := range 1 + r.IntN(8) {
			sel := &metav1.LabelSelector{}
			switch r.IntN(5) {
			case 4: // {} selects every pod of the namespace
			case 0:
				sel.MatchLabels = map[string]string{"app": pick("a", "b")}
			case 1:
				sel.MatchLabels = map[string]string{"app": pick("a", "b"), "tier": pick("x", "y")}
			case 2:
				sel.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{pick("x", "y")}}}
			default:
				sel.MatchLabels = map[string]string{"tier": pick("x", "y")}
				sel.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}
			}
			pdbs = append(pdbs, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pdb-%d", i), Namespace: pick("ns-1", "ns-2")},
				Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel}})
		}
		budgets := drain.NewBudgets(pdbs)
		for range 20 {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: pick("ns-1", "ns-2"), Labels: map[string]string{}}}
			if r.IntN(3) > 0 {
				pod.Labels["app"] = pick("a", "b")
			}
			if r.IntN(3) > 0 {
				pod.Labels["tier"] = pick("x", "y")
			}
			var want []string
			for _, pdb := range pdbs {
				sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if pdb.Namespace == pod.Namespace && sel.Matches(labels.Set(pod.Labels)) {
					want = append(want, pdb.Name)
				}
			}
			var got []string
			for _, pdb := range budgets.Matching(pod) {
				got = append(got, pdb.Name)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: pod %s %v: Matching %v, want %v", round, pod.Namespace, pod.Labels, got, want)
			}
		}
	}
}
