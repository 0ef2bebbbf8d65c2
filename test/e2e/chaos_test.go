package e2e

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// Node groups of the soak, all of 2-cpu nodes:
//   - chaos-web: the web Deployment (900m pods, PDB minAvailable 2), a
//     Headroom of one 1500m unit held by a placeholder pod, and one node
//     the test made (no owner mark) that takes pods like the others. With
//     n web pods the group needs ceil(n/2) nodes for them and one for the
//     unit (a node with one pod has 1100m left), the test's node counted.
//   - chaos-keep: two bare pods and two do-not-disrupt pods of 1 cpu, one
//     per node (anti-affinity), and the filler Deployment (900m, no PDB):
//     four fillers fit next to them, two more per node beyond.
//   - chaos-foreign: one empty node the test made: never berth's to remove.
const (
	groupWeb, groupKeep, groupForeign = "chaos-web", "chaos-keep", "chaos-foreign"
	webMinAvailable                   = 2
)

func webNodes(n int32) int  { return int(n+1)/2 + 1 }
func keepNodes(n int32) int { return 4 + int(max(0, n-4)+1)/2 }
func chaosGroups() []string { return []string{groupWeb, groupKeep, groupForeign} }

// chaosPhase is one step of a cycle: the replicas to scale to and the
// nodes each group must end with.
type chaosPhase struct {
	name        string
	web, filler int32
}

func (p chaosPhase) planned() map[string]int {
	return map[string]int{groupWeb: webNodes(p.web), groupKeep: keepNodes(p.filler), groupForeign: 1}
}

// chaosSettings are the sizes of one soak.
type chaosSettings struct {
	cycles    int
	killEvery [2]time.Duration
	maxKills  int // 0: no limit
	phaseMax  time.Duration
	// hold is how long a phase's planned state must hold: longer than a
	// group's consolidateAfter (2 s) plus a scale-down round (1 s), so that
	// berth had its chance to take one node too many.
	hold  time.Duration
	rates faultRates
}

func chaosSettingsFromEnv() chaosSettings {
	s := chaosSettings{cycles: 1, killEvery: [2]time.Duration{20 * time.Second, 60 * time.Second}, maxKills: 1, phaseMax: 3 * time.Minute, hold: 4 * time.Second,
		rates: faultRates{Error: 0.05, Conflict: 0.05, Delay: 0.05, Lost: 0.02, MaxDelay: 3 * time.Second,
			WatchExpire: 0.1, WatchDelay: 0.25, WatchLag: 0.2, MaxWatchDelay: 4 * time.Second,
			WatchCut: [2]time.Duration{10 * time.Second, 45 * time.Second}}}
	if os.Getenv("BERTH_E2E_CHAOS") != "" {
		s.cycles, s.killEvery, s.maxKills, s.phaseMax, s.hold = 3, [2]time.Duration{40 * time.Second, 100 * time.Second}, 0, 4*time.Minute, 10*time.Second
	}
	if n, err := strconv.Atoi(os.Getenv("BERTH_CHAOS_CYCLES")); err == nil && n > 0 {
		s.cycles = n
	}
	return s
}

// chaosSeed is BERTH_CHAOS_SEED, or the time.
func chaosSeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("BERTH_CHAOS_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}

// chaosPhases are the cycles 0 -> up -> down -> 0 of both Deployments:
// the first cycle of fixed sizes, the others drawn from the seed. The
// down size of web stays above the PDB's minimum, so that drains can go on.
func chaosPhases(cycles int, rng *mrand.Rand) []chaosPhase {
	var out []chaosPhase
	for i := range cycles {
		up, down := chaosPhase{web: 6, filler: 6}, chaosPhase{web: 3, filler: 2}
		if i > 0 {
			up = chaosPhase{web: 5 + rng.Int32N(6), filler: 5 + rng.Int32N(5)}
			down = chaosPhase{web: webMinAvailable + 1 + rng.Int32N(2), filler: 1 + rng.Int32N(4)}
		}
		up.name, down.name = fmt.Sprintf("cycle %d up", i+1), fmt.Sprintf("cycle %d down", i+1)
		out = append(out, up, down, chaosPhase{name: fmt.Sprintf("cycle %d to zero", i+1)})
	}
	return out
}

func chaosNodeGroup(name string) *v1alpha1.NodeGroup {
	after, budget := metav1.Duration{Duration: 2 * time.Second}, intstr.FromString("50%")
	ng := b.NodeGroup(name, b.Size(0, 20), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: time.Second}))
	ng.Spec.Disruption.ConsolidateAfter, ng.Spec.Disruption.Budget = &after, &budget
	return ng
}

// foreignNode is a Ready KWOK node of the group that berth did not launch
// (no owner mark); withProviderID makes it look like one of the KWOK
// provider's instances too.
func foreignNode(name, group string, withProviderID bool) *corev1.Node {
	n := b.Node(name, "2", "8Gi", b.KWOK(), b.NodeLabels(v1alpha1.LabelNodeGroup, group, v1alpha1.LabelInstanceType, "m-2",
		v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, string(v1alpha1.CapacityTypeOnDemand)))
	if withProviderID {
		n.Spec.ProviderID = v1alpha1.ProviderIDPrefixKWOK + name
	}
	return n
}

var protectedLabel = []string{"chaos.berth.dev/protected", "true"}

func chaosPodOptions(kind, group, cpu string) []b.PodOption {
	opts := []b.PodOption{b.CPU(cpu), b.Labels(labelChaosKind, kind), b.NodeSelector(v1alpha1.LabelNodeGroup, group)}
	if kind == kindBare || kind == kindNoDisrupt {
		opts = append(opts, b.Labels(protectedLabel...), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, protectedLabel...)))
	}
	if kind == kindNoDisrupt {
		opts = append(opts, b.Annotation(v1alpha1.AnnotationDoNotDisrupt, "true"))
	}
	return opts
}

func chaosDeployment(ns, name, kind, group, cpu string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas, chaosPodOptions(kind, group, cpu)...)
	tmpl := b.Pod(name, chaosPodOptions(kind, group, cpu)...)
	d.Spec.Template.Labels[labelChaosKind] = kind
	for k, v := range tmpl.Labels {
		d.Spec.Template.Labels[k] = v
	}
	d.Spec.Template.Annotations = tmpl.Annotations
	return d
}

// chaosWorkloads are the soak's objects in ns: the Headroom, the PDB, the
// Deployments (web and filler at 0) and the protected pods.
func chaosWorkloads(ns string) []client.Object {
	hr := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "chaos-spare"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{groupWeb}}, Placeholders: true,
		Units: &v1alpha1.HeadroomUnits{Count: 1, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(webMinAvailable)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	objs := []client.Object{hr, pdb,
		chaosDeployment(ns, "web", kindWeb, groupWeb, "900m", 0),
		chaosDeployment(ns, "filler", kindFiller, groupKeep, "900m", 0),
		chaosDeployment(ns, "pinned", kindNoDisrupt, groupKeep, "1", 2)}
	for i := range 2 {
		objs = append(objs, b.Pod(fmt.Sprintf("bare-%d", i), append(chaosPodOptions(kindBare, groupKeep, "1"), b.Namespace(ns), b.NoUID())...))
	}
	return objs
}

// TestChaosSoak: berth's controller runs behind a proxy that fails,
// delays and conflicts a share of its requests and delays, cuts and
// expires its watches, and is killed (SIGKILL) at random moments, while
// the web and filler Deployments go 0 -> up -> down -> 0 (once here, with
// one kill; three times with BERTH_E2E_CHAOS=1, `make chaos`). Before
// each scale-down one pod per node is kept (pod-deletion-cost), so that
// berth must evict pods to consolidate. An independent watcher checks
// all along: no protected pod (bare, do-not-disrupt) goes; a workload pod
// goes only evicted or by its ReplicaSet, never with its node; the web
// PDB never drops below its minimum; no node without berth's owner mark
// is deleted; berth never deletes a workload pod itself. Every phase must
// end at its planned node count, nothing tainted, cordoned or gated.
func TestChaosSoak(t *testing.T) {
	settings, seed := chaosSettingsFromEnv(), chaosSeed()
	t.Logf("chaos soak: seed %d (BERTH_CHAOS_SEED), %d cycle(s)", seed, settings.cycles)
	began := time.Now()
	r := startChaos(t, settings, seed)
	defer r.close()
	for _, ph := range append([]chaosPhase{{name: "start"}}, chaosPhases(settings.cycles, mrand.New(mrand.NewPCG(seed, 1)))...) {
		if ph.web < webMinAvailable {
			r.w.unguardPDB()
		}
		if strings.HasSuffix(ph.name, " down") {
			spreadSurvivors(t, r.ns, "web")
			spreadSurvivors(t, r.ns, "filler")
		}
		scale(t, r.ns, "web", ph.web)
		scale(t, r.ns, "filler", ph.filler)
		if ph.web >= webMinAvailable {
			r.w.guardPDB(webMinAvailable)
		}
		settle(t, r.w, r.ns, ph, settings.phaseMax, settings.hold)
		r.w.judgeNodeDeletions(5 * time.Second)
	}
	r.ctrl.stop()
	r.proxy.setEnabled(false)
	time.Sleep(5 * time.Second) // the last pod and node events
	r.w.judgeNodeDeletions(0)
	judgeBerthWrites(r.w, r.proxy, r.ns)
	report(t, r.w, r.proxy, r.ctrl, time.Since(began))
}

// chaosRun is a soak under way.
type chaosRun struct {
	ns    string
	w     *chaosWatcher
	proxy *chaosProxy
	ctrl  *chaosController
}

// close stops the controller, the proxy and the watcher, before the
// test's clean-up deletes what they watch.
func (r *chaosRun) close() {
	r.ctrl.stop()
	r.proxy.close()
	r.w.close()
}

// startChaos creates the node groups, the watcher, the nodes berth did not
// launch and the workloads, and starts the controller behind the proxy.
func startChaos(t *testing.T, settings chaosSettings, seed uint64) *chaosRun {
	t.Helper()
	r := &chaosRun{ns: newNamespace(t)}
	groups := map[string]types.UID{}
	for _, name := range chaosGroups() {
		ng := chaosNodeGroup(name)
		createNodeGroup(t, ng)
		groups[name] = ng.UID
	}
	var err error
	if r.w, err = startChaosWatcher(r.ns, groups); err != nil {
		t.Fatal(err)
	}
	createForTest(t, foreignNode("chaos-web-foreign", groupWeb, true), foreignNode("chaos-foreign-0", groupForeign, false))
	createForTest(t, chaosWorkloads(r.ns)...)
	if r.proxy, err = newChaosProxy(env.Config, settings.rates, seed); err != nil {
		r.w.close()
		t.Fatal(err)
	}
	kubeconfig, err := r.proxy.kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	if dir := os.Getenv("BERTH_E2E_LOG_DIR"); dir != "" {
		logDir = dir
	}
	// Every failed launch makes berth avoid the offering for the TTL (3 min
	// by default), doubling with each failure in a row; the soak's groups
	// have one offering each and an injected error on a Node's creation is
	// such a failure, so the TTL is short here.
	r.ctrl = &chaosController{kubeconfig: kubeconfig, dir: logDir, killEvery: settings.killEvery, maxKills: settings.maxKills, drainNow: r.w.drainUnderWay,
		rng: mrand.New(mrand.NewPCG(seed, 2)), args: []string{"--scale-down-interval=1s", "--unavailable-offering-ttl=10s", "--zap-log-level=debug",
			"--leader-elect=true", "--leader-election-lease-duration=8s", "--leader-election-renew-deadline=6s", "--leader-election-retry-period=1s"}}
	r.ctrl.start()
	return r
}

// spreadSurvivors makes the Deployment's ReplicaSet keep one pod per node
// when it scales down (pod-deletion-cost on one pod of each node), so
// that the nodes are left part-empty and berth must evict pods to
// consolidate them, under the PDB for web.
func spreadSurvivors(t *testing.T, ns, app string) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || kept[p.Spec.NodeName] {
			continue
		}
		kept[p.Spec.NodeName] = true
		patch := []byte(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1000"}}}`)
		if err := env.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := env.Client.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))); err != nil {
		t.Fatal(err)
	}
}
