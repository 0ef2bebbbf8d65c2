package disruption_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// guard wraps the provider: it records every launch and checks every
// deletion against the invariants at the moment of the call.
type guard struct {
	cloudprovider.CloudProvider
	groupUID string
	mu       sync.Mutex
	round    string
	launches []string // "name replaces=[...]"
	replaces map[string]int
	deletes  []string
	bad      []string
}

func (g *guard) violate(format string, args ...any) {
	g.bad = append(g.bad, fmt.Sprintf("[after %s] ", g.round)+fmt.Sprintf(format, args...))
}

// Create records a launch; a replacement for a node still marked
// replaced by an earlier one (not given up) is a violation. A node whose
// replacement was given up may get another: a new decision.
func (g *guard) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	marked := map[string]string{}
	for _, r := range req.Replaces {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: r}, n); err == nil && n.Annotations[v1alpha1.AnnotationReplacedBy] != "" {
			marked[r] = n.Annotations[v1alpha1.AnnotationReplacedBy]
		}
	}
	inst, err := g.CloudProvider.Create(ctx, req)
	if err == nil {
		g.mu.Lock()
		g.launches = append(g.launches, fmt.Sprintf("%s replaces=%v during %s", inst.NodeName, req.Replaces, g.round))
		for _, r := range req.Replaces {
			g.replaces[r]++
			if by := marked[r]; by != "" {
				g.violate("node %s got replacement #%d (%s) while still marked replaced by %s", r, g.replaces[r], inst.NodeName, by)
			}
		}
		g.mu.Unlock()
	}
	return inst, err
}

func (g *guard) Delete(ctx context.Context, name string) error {
	g.mu.Lock()
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err == nil {
		if n.Annotations[v1alpha1.AnnotationLaunchedBy] != g.groupUID {
			g.violate("deleted node %s not launched by berth's group (launched-by %q)", name, n.Annotations[v1alpha1.AnnotationLaunchedBy])
		}
		pods := &corev1.PodList{}
		_ = env.Client.List(ctx, pods, client.MatchingFields{"spec.nodeName": name})
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !podutil.IsTerminal(&p) && !podutil.IsOwnedByDaemonSet(&p) && !podutil.IsMirror(&p) {
				g.violate("deleted node %s while pod %s/%s is bound and not terminating", name, p.Namespace, p.Name)
			}
		}
	}
	g.deletes = append(g.deletes, name)
	g.mu.Unlock()
	return g.CloudProvider.Delete(ctx, name)
}

func (g *guard) Pending(ctx context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	if l, ok := g.CloudProvider.(cloudprovider.PendingLister); ok {
		return l.Pending(ctx, ng)
	}
	return nil, nil
}

// probe is a fixture whose controller can be restarted between rounds.
type probe struct {
	*fixture
	g        *guard
	cl       client.Client
	restarts int
	restart  bool
	taintAt  map[string]time.Time // first round (fake clock) a node was seen tainted
	rounds   int
}

func newProbe(f *fixture, restart bool) *probe {
	g := &guard{CloudProvider: f.ctrl.Cloud, groupUID: string(f.group.UID), replaces: map[string]int{}, round: "setup"}
	if g.groupUID == "" {
		ng := &v1alpha1.NodeGroup{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(f.group), ng); err != nil {
			f.t.Fatal(err)
		}
		g.groupUID = string(ng.UID)
	}
	p := &probe{fixture: f, g: g, restart: restart, taintAt: map[string]time.Time{}}
	p.cl = interceptor.NewClient(env.WatchingClient(f.t), interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			if sub == "eviction" {
				pod := &corev1.Pod{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), pod); err == nil && pod.DeletionTimestamp == nil {
					n := &corev1.Node{}
					if err := env.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, n); err == nil && !nodeutil.Disrupted(n) {
						g.mu.Lock()
						g.violate("evicted pod %s on node %s which is not draining", pod.Name, n.Name)
						g.mu.Unlock()
					}
				}
			}
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		}})
	f.ctrl.Client = p.cl
	f.ctrl.Cloud = g
	return p
}

// round runs one round (retrying conflicts), checks the invariants, and
// restarts the controller afterwards when asked.
func (p *probe) round(label string) *disruption.Result {
	p.t.Helper()
	p.rounds++
	p.g.mu.Lock()
	p.g.round = fmt.Sprintf("round %d (%s, restarts so far %d)", p.rounds, label, p.restarts)
	p.g.mu.Unlock()
	var res *disruption.Result
	for range 5 {
		r, err := p.ctrl.RunOnce(context.Background())
		if err == nil {
			res = r
			break
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			p.t.Logf("round %d error: %v", p.rounds, err)
			res = r
			break
		}
	}
	if res == nil {
		res = &disruption.Result{}
	}
	p.checkTaints()
	if p.restart {
		p.ctrl = disruption.New(disruption.Deps{Client: p.cl, Cloud: p.g, Recorder: p.events, Clock: p.clk, Offerings: p.ctrl.Offerings},
			disruption.Options{Interval: time.Second})
		p.restarts++
	}
	return res
}

// checkTaints: no node tainted berth.dev/disrupted past drainTimeout + margin
// unless its provider accepted its removal.
func (p *probe) checkTaints() {
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: p.group.Name}); err != nil {
		p.t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !nodeutil.Disrupted(n) {
			delete(p.taintAt, n.Name)
			continue
		}
		at, ok := p.taintAt[n.Name]
		if !ok {
			p.taintAt[n.Name] = p.clk.Now()
			continue
		}
		if p.clk.Since(at) > 5*time.Minute+3*time.Minute && n.Annotations[v1alpha1.AnnotationRemovalAccepted] == "" {
			p.g.mu.Lock()
			p.g.violate("node %s tainted for %s (drain timeout 5m)", n.Name, p.clk.Since(at))
			p.g.mu.Unlock()
			p.taintAt[n.Name] = p.clk.Now() // once
		}
	}
}

// state summarizes the end state, comparable across runs.
func (p *probe) state() string {
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: p.group.Name}); err != nil {
		p.t.Fatal(err)
	}
	var ns []string
	for _, n := range nodes.Items {
		orig := "new"
		if slices.Contains(p.nodes, n.Name) {
			orig = "orig"
		}
		ns = append(ns, fmt.Sprintf("%s/%s/tainted=%v/replacedBy=%v", orig, n.Labels[v1alpha1.LabelInstanceType], nodeutil.Disrupted(&n),
			n.Annotations[v1alpha1.AnnotationReplacedBy] != ""))
	}
	sort.Strings(ns)
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(p.ns)); err != nil {
		p.t.Fatal(err)
	}
	running := 0
	for _, pod := range pods.Items {
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			running++
		}
	}
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	return fmt.Sprintf("nodes=%v runningPods=%d launches=%d deletes=%d", ns, running, len(p.g.launches), len(p.g.deletes))
}

func (p *probe) report() {
	p.t.Helper()
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	p.t.Logf("restart=%v rounds=%d restarts=%d launches=%v deletes=%v", p.restart, p.rounds, p.restarts, p.g.launches, p.g.deletes)
	for _, v := range p.g.bad {
		p.t.Errorf("VIOLATION: %s", v)
	}
}

// both runs scenario without and with restarts and compares the end states.
func both(t *testing.T, name string, scenario func(t *testing.T, name string, restart bool) *probe) {
	var states [2]string
	for i, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			p := scenario(t, fmt.Sprintf("%s-%d", name, i), restart)
			p.report()
			states[i] = p.state()
			t.Logf("end state: %s", states[i])
		})
	}
	if states[0] != states[1] {
		t.Errorf("end state differs:\n without restarts: %s\n with restarts:    %s", states[0], states[1])
	}
}

// until runs rounds, stepping the fake clock by step (and sleeping a
// moment of real time), until done or max rounds.
func (p *probe) until(label string, step time.Duration, maxRounds int, done func(*disruption.Result) bool) {
	p.t.Helper()
	for range maxRounds {
		res := p.round(label)
		if done(res) {
			return
		}
		p.clk.Step(step)
		time.Sleep(300 * time.Millisecond)
	}
	p.t.Errorf("%s: not done after %d rounds", label, maxRounds)
}

func (p *probe) origGone() bool {
	for _, n := range p.nodes {
		if p.node(n) != nil {
			return false
		}
	}
	return true
}

// 1. Consolidation: taint -> evict -> wait for the pod shutting down -> delete.
func TestRestartProbeConsolidation(t *testing.T) {
	both(t, "rp-cons", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 2)
		f.slowDeployment("slow", 30)
		f.waitRunning(2)
		p := newProbe(f, restart)
		var victim string
		p.until("consolidation", 20*time.Second, 30, func(res *disruption.Result) bool {
			if victim == "" && len(res.Started) > 0 {
				victim = res.Started[0]
			}
			return victim != "" && p.node(victim) == nil
		})
		f.waitRunning(2)
		return p
	})
}

// 2a. A cheaper replacement whose node boots NotReady for a while
// (restarts while it boots, right after it is Ready, during the drains).
func TestRestartProbeCheaperReplacement(t *testing.T) {
	both(t, "rp-repl", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 3)
		f.deploymentOf(3, "1200m")
		p := newProbe(f, restart)
		f.updateGroup(func(g *v1alpha1.NodeGroup) {
			b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g)
			g.Spec.Provider.KWOK.LaunchDelay = &metav1.Duration{Duration: 6 * time.Second}
		})
		p.until("cheaper replacement", 20*time.Second, 60, func(*disruption.Result) bool { return p.origGone() })
		f.waitRunning(3)
		return p
	})
}

// 3a. Drift: the only node drifts; its replacement is launched first.
func TestRestartProbeDrift(t *testing.T) {
	both(t, "rp-drift", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 1)
		f.slowDeployment("slow", 30)
		f.waitRunning(2)
		p := newProbe(f, restart)
		f.updateGroup(func(g *v1alpha1.NodeGroup) {
			g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"}
			g.Spec.Provider.KWOK.LaunchDelay = &metav1.Duration{Duration: 4 * time.Second}
		})
		p.until("drift", 20*time.Second, 60, func(*disruption.Result) bool { return p.origGone() })
		f.waitRunning(2)
		return p
	})
}

// 3b. Expiry of two nodes, budget one at a time.
func TestRestartProbeExpiry(t *testing.T) {
	both(t, "rp-exp", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 2)
		f.deploymentOf(2, "1200m")
		p := newProbe(f, restart)
		one := intstr.FromInt32(1)
		f.updateGroup(func(g *v1alpha1.NodeGroup) {
			g.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Hour}
			g.Spec.Disruption.Budget = &one
		})
		f.clk.Step(90 * time.Minute)
		p.round("expiry first")
		f.clk.SetTime(time.Now())
		p.until("expiry", 10*time.Second, 60, func(*disruption.Result) bool {
			return p.state() != "" && p.g.deletes != nil && len(p.g.deletes) >= 1 && p.stable()
		})
		f.waitRunning(2)
		return p
	})
}

// 4. A drain held by a PDB until the drain timeout: given up, untainted.
func TestRestartProbePDBTimeout(t *testing.T) {
	both(t, "rp-pdb", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 2)
		p := newProbe(f, restart)
		f.deployment(2)
		f.pdb(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 1)
		res := p.round("pdb start")
		if len(res.Started) != 1 {
			t.Fatalf("started %v", res.Started)
		}
		victim := res.Started[0]
		f.pdb(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 0)
		givenUp := false
		p.until("pdb held", 30*time.Second, 30, func(res *disruption.Result) bool {
			givenUp = givenUp || contains(res.GivenUp, victim)
			n := p.node(victim)
			return givenUp && n != nil && !tainted(n)
		})
		// and some more rounds: not drained again while the PDB allows none
		for range 4 {
			p.round("after give-up")
			p.clk.Step(time.Minute)
		}
		f.waitRunning(2)
		return p
	})
}

// stable: no node of the group tainted or marked.
func (p *probe) stable() bool {
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: p.group.Name}); err != nil {
		p.t.Fatal(err)
	}
	for i := range nodes.Items {
		if nodeutil.Disrupted(&nodes.Items[i]) || nodes.Items[i].Annotations[v1alpha1.AnnotationReplacedBy] != "" {
			return false
		}
	}
	return true
}

// 4b. An emptied node whose provider refuses its removal for good: the
// drain must be given up at the drain timeout.
func TestRestartProbeRefusedRemoval(t *testing.T) {
	both(t, "rp-refused", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 1)
		f.ctrl.Cloud = &refusingDelete{CloudProvider: f.ctrl.Cloud}
		p := newProbe(f, restart)
		victim := f.nodes[0]
		started := false
		p.until("refused removal", time.Minute, 20, func(res *disruption.Result) bool {
			started = started || contains(res.Started, victim)
			return started && contains(res.GivenUp, victim)
		})
		return p
	})
}

// 4c. Only critical pods left, their PDB allowing no disruption: the drain
// must be given up at the drain timeout.
func TestRestartProbeCriticalHeld(t *testing.T) {
	both(t, "rp-crit", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 2)
		f.criticalDeployment("crit")
		f.waitRunning(2)
		p := newProbe(f, restart)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "crit", Namespace: f.ns}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "crit"}}}}
		if err := env.Client.Create(context.Background(), pdb); err != nil {
			t.Fatal(err)
		}
		waitAllowed := func(n int32) {
			for range 100 {
				_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(pdb), pdb)
				if pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == n {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Fatalf("pdb allows %d, want %d", pdb.Status.DisruptionsAllowed, n)
		}
		waitAllowed(1)
		res := p.round("crit start")
		if len(res.Started) != 1 {
			t.Fatalf("started %v", res.Started)
		}
		victim := res.Started[0]
		tighten := client.MergeFrom(pdb.DeepCopy())
		pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(2))
		if err := env.Client.Patch(context.Background(), pdb, tighten); err != nil {
			t.Fatal(err)
		}
		waitAllowed(0)
		p.until("critical held", time.Minute, 20, func(res *disruption.Result) bool { return contains(res.GivenUp, victim) })
		return p
	})
}

// 2b. A replacement whose Node does not register for minutes (slowBoot):
// restarts while it boots; then the provider stops launching it.
func TestRestartProbeReplacementBooting(t *testing.T) {
	both(t, "rp-boot", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 3)
		cloud := &slowBoot{CloudProvider: f.ctrl.Cloud}
		f.ctrl.Cloud = cloud
		p := newProbe(f, restart)
		f.deploymentOf(3, "1200m")
		f.updateGroup(func(g *v1alpha1.NodeGroup) { b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g) })
		var repl string
		p.until("launch", 5*time.Second, 30, func(res *disruption.Result) bool {
			if len(res.Replacements) > 0 {
				repl = res.Replacements[0]
			}
			return repl != ""
		})
		for i := range 10 {
			p.clk.Step(time.Minute)
			p.round("booting")
			if got := f.markedBy(repl); got != 3 {
				t.Errorf("booting minute %d: %d of 3 nodes marked", i, got)
			}
		}
		cloud.mu.Lock()
		cloud.gone = true
		cloud.mu.Unlock()
		p.until("given up", time.Minute, 3, func(*disruption.Result) bool { return f.markedBy(repl) == 0 })
		return p
	})
}

// 5. Budget: four idle nodes, budget one: never more than one draining.
func TestRestartProbeBudget(t *testing.T) {
	both(t, "rp-budget", func(t *testing.T, name string, restart bool) *probe {
		f := setup(t, name, 4)
		f.slowDeployment("slow", 30) // two pods, held while shutting down
		f.waitRunning(2)
		one := intstr.FromInt32(1)
		f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Disruption.Budget = &one })
		p := newProbe(f, restart)
		for range 25 {
			p.round("budget")
			nodes := &corev1.NodeList{}
			_ = env.Client.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: f.group.Name})
			draining := 0
			for i := range nodes.Items {
				if nodeutil.Disrupted(&nodes.Items[i]) {
					draining++
				}
			}
			if draining > 1 {
				t.Errorf("round %d: %d nodes draining, budget 1", p.rounds, draining)
			}
			p.clk.Step(20 * time.Second)
			time.Sleep(300 * time.Millisecond)
		}
		return p
	})
}
