package snapshot_test

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestBaseFollowsTheCluster applies random event sequences to a cluster
// (nodes and pods added, deleted, relabelled, tainted, rebound, finished,
// read again as fresh copies; the taints to ignore changing as a node
// boots; namespaces relabelled) and checks, on every step, that the base
// brought up to date incrementally is the snapshot built from scratch:
// every node's pods, requests, ports, shape and group, and every probe
// pod's filter verdict on every node. Between steps it plans on the base
// as a round does (pods and planned nodes added, base pods removed,
// nodes cordoned, templates and limits set, counters registered) and
// releases it: nothing of a round may leak into the next.
func TestBaseFollowsTheCluster(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			c := newEventCluster(r)
			base := snapshot.NewBase()
			var w changeWatch
			for step := range 30 {
				c.events(r)
				in := c.input()
				in.Changes = w.changes(r, c)
				in.Held = c.held(r)
				fromChanges := base.FromChanges
				if r.Intn(8) == 0 {
					// A round with nothing to plan: its changes are read
					// with the next round's.
					base.Postpone(in.Changes)
					continue
				}
				s, err := base.Snapshot(in)
				if err != nil {
					t.Fatal(err)
				}
				fresh := build(t, in)
				if diff := cmp.Diff(observeAnyOrder(t, fresh), observeAnyOrder(t, s)); diff != "" {
					t.Fatalf("step %d (%d builds, %d syncs): the base differs from the cluster built from scratch (-scratch +base):\n%s",
						step, base.Builds, base.Syncs, diff)
				}
				for _, ni := range in.Nodes {
					if n := s.Node(ni.Node.Name); n == nil || n.Node != ni.Node {
						t.Fatalf("step %d: node %s is missing or an older object than the cluster's", step, ni.Node.Name)
					}
				}
				planOn(t, r, s)
				base.Release(s)
				if r.Intn(6) == 0 { // planned again on the same input (a retry)
					followed := base.FromChanges > fromChanges
					if s, err = base.Snapshot(in); err != nil {
						t.Fatal(err)
					}
					if followed && base.FromChanges != fromChanges+2 {
						t.Fatalf("step %d, again: the round looked at every pod; it had read the changes already", step)
					}
					if diff := cmp.Diff(observeAnyOrder(t, fresh), observeAnyOrder(t, s)); diff != "" {
						t.Fatalf("step %d, again: the base differs from the cluster built from scratch (-scratch +base):\n%s", step, diff)
					}
					base.Release(s)
				}
			}
			if base.Syncs < 16 || base.FromChanges < 3 {
				t.Errorf("the base was brought up to date incrementally in %d of 30 steps, %d of them from the changes (%d builds)", base.Syncs, base.FromChanges, base.Builds)
			}
		})
	}
}

// eventCluster is the cluster of TestBaseFollowsTheCluster, as an
// informer cache holds it: a changed object is a new one.
type eventCluster struct {
	nodes      []snapshot.NodeInput
	pods       []*corev1.Pod
	namespaces []*corev1.Namespace
	next, rv   int
	// inPlace: a pod was changed in place since the last round.
	inPlace bool
}

func newEventCluster(r *rand.Rand) *eventCluster {
	c := &eventCluster{}
	c.namespaces = []*corev1.Namespace{{}}
	c.namespaces[0].Name, c.namespaces[0].ResourceVersion = "default", "1"
	for range 4 {
		c.addNode(r)
	}
	for range 12 {
		c.addPod(r)
	}
	// A pod bound to a node that registers later (events: case 15).
	c.addPod(r)
	c.pods[len(c.pods)-1].Spec.NodeName = "late"
	return c
}

func (c *eventCluster) version() string { c.rv++; return fmt.Sprint(c.rv) }

func (c *eventCluster) addNode(r *rand.Rand) {
	name := fmt.Sprintf("n%d", c.next)
	c.next++
	n := b.Node(name, "4", "16Gi", b.NodeLabels(v1alpha1.LabelZone, []string{"zone-a", "zone-b"}[r.Intn(2)]))
	if r.Intn(2) == 0 {
		n.Labels["rack"] = fmt.Sprint("r", r.Intn(2))
	}
	n.UID, n.ResourceVersion = types.UID(name), c.version()
	c.nodes = append(c.nodes, snapshot.NodeInput{Node: n, NodeGroup: []string{"g", "h", ""}[r.Intn(3)]})
}

func (c *eventCluster) addPod(r *rand.Rand) {
	var p *corev1.Pod
	name := fmt.Sprintf("p%d", c.next)
	c.next++
	switch r.Intn(7) {
	case 6: // keeps web pods of team a's namespaces out of its zone
		term := b.AffinityTerm(v1alpha1.LabelZone, "app", "web")
		term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		p = b.Pod(name, b.Labels("app", "guard"), b.PodAntiAffinity(term))
	case 0:
		p = b.Pod(name, b.Labels("app", "web"), b.CPU("500m"))
	case 1:
		p = b.Pod(name, b.Labels("app", "db"), b.CPU("250m"), b.HostPort(int32(8000+r.Intn(3)), corev1.ProtocolTCP))
	case 2:
		p = b.Pod(name, b.Labels("app", "api"), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelZone, "app", "web")))
	case 3:
		p = b.Pod(name, b.Labels("app", "cache"), b.CPU("100m"), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "app", "cache")))
	case 4:
		p = b.Pod(name, b.Labels("app", "web", v1alpha1.LabelCompanionShareKey, "web"), b.Spread(v1alpha1.LabelZone, 1, "app", "web"))
	default:
		p = b.Pod(name, b.Labels("app", "web"), b.Spread(v1alpha1.LabelZone, 1, "app", "web"))
	}
	p.UID, p.ResourceVersion = types.UID(name), c.version()
	c.bind(r, p)
	c.pods = append(c.pods, p)
}

// bind puts a pod on a node of the cluster, or now and then on a node
// the cluster does not have (yet).
func (c *eventCluster) bind(r *rand.Rand, p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	if r.Intn(10) == 0 {
		p.Spec.NodeName = fmt.Sprintf("n%d", c.next) // a node that may come
		return
	}
	if len(c.nodes) > 0 {
		p.Spec.NodeName = c.nodes[r.Intn(len(c.nodes))].Node.Name
	}
}

// events changes the cluster as it changes between two rounds.
func (c *eventCluster) events(r *rand.Rand) {
	for range 1 + r.Intn(4) {
		switch r.Intn(17) {
		case 0:
			c.addNode(r)
		case 1:
			if len(c.nodes) > 1 {
				i := r.Intn(len(c.nodes))
				c.nodes = slices.Delete(c.nodes, i, i+1)
			}
		case 2, 3:
			c.changeNode(r)
		case 4, 5, 6:
			c.addPod(r)
		case 7, 8:
			if len(c.pods) > 0 {
				i := r.Intn(len(c.pods))
				c.pods = slices.Delete(c.pods, i, i+1)
			}
		case 9, 10, 11:
			c.changePod(r)
		case 14: // a pod changed in place, with a new version (not the
			// informer cache's way, but a caller's: it gives no changes)
			c.inPlace = true
			if len(c.pods) > 0 {
				p := c.pods[r.Intn(len(c.pods))]
				if r.Intn(2) == 0 {
					c.bind(r, p)
				} else {
					p.Labels = map[string]string{"app": []string{"web", "db", "api", "cache"}[r.Intn(4)]}
				}
				p.ResourceVersion = c.version()
			}
		case 12: // every object read again as a fresh copy
			for i := range c.nodes {
				c.nodes[i].Node = c.nodes[i].Node.DeepCopy()
			}
			for i := range c.pods {
				c.pods[i] = c.pods[i].DeepCopy()
			}
		case 15: // the late node registers
			if !slices.ContainsFunc(c.nodes, func(ni snapshot.NodeInput) bool { return ni.Node.Name == "late" }) {
				n := b.Node("late", "4", "16Gi")
				n.UID, n.ResourceVersion = "late", c.version()
				c.nodes = append(c.nodes, snapshot.NodeInput{Node: n})
			}
		case 13:
			ns := c.namespaces[0].DeepCopy()
			ns.Labels = map[string]string{"team": []string{"a", "b"}[r.Intn(2)]}
			ns.ResourceVersion = c.version()
			c.namespaces[0] = ns
		default: // nothing happens
		}
	}
}

func (c *eventCluster) changeNode(r *rand.Rand) {
	if len(c.nodes) == 0 {
		return
	}
	ni := &c.nodes[r.Intn(len(c.nodes))]
	n := ni.Node.DeepCopy()
	switch r.Intn(7) {
	case 5: // a status heartbeat (nothing the planner reads changes), or
		// the node turns Ready or NotReady (kube-scheduler binds to it or not)
		status := corev1.ConditionTrue
		if r.Intn(3) == 0 {
			status = corev1.ConditionFalse
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: c.version()}}
	case 6:
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(2 + r.Intn(3))),
			corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	case 0:
		n.Labels[v1alpha1.LabelZone] = []string{"zone-a", "zone-b", "zone-c"}[r.Intn(3)]
	case 1:
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule})
	case 2:
		n.Spec.Taints = nil
	case 3:
		n.Spec.Unschedulable = !n.Spec.Unschedulable
	default: // booting is over, or the group's startup taint is ignored now
		if len(ni.IgnoreTaints) == 0 {
			ni.IgnoreTaints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
		} else {
			ni.IgnoreTaints = nil
		}
		return // the same object
	}
	n.ResourceVersion = c.version()
	ni.Node = n
}

func (c *eventCluster) changePod(r *rand.Rand) {
	if len(c.pods) == 0 {
		return
	}
	i := r.Intn(len(c.pods))
	p := c.pods[i].DeepCopy()
	switch r.Intn(4) {
	case 0:
		p.Labels = map[string]string{"app": []string{"web", "db", "api", "cache"}[r.Intn(4)]}
	case 1:
		c.bind(r, p) // deleted and made again under the same name elsewhere
	case 2:
		p.Status.Phase = corev1.PodSucceeded
	default:
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+100*r.Intn(5)))}
	}
	p.ResourceVersion = c.version()
	c.pods[i] = p
}

func (c *eventCluster) input() snapshot.Input {
	return snapshot.Input{Nodes: slices.Clone(c.nodes), Pods: slices.Clone(c.pods), Namespaces: c.namespaces}
}

// observeAnyOrder renders what a caller sees of a snapshot, nodes by
// name and each node's pods by name (the base keeps them in the order
// they came, a build in the order of its input).
func observeAnyOrder(t *testing.T, s *snapshot.Snapshot) string {
	t.Helper()
	classes := classify(t, s)
	var lines []string
	for i, n := range s.Nodes {
		var pods []string
		for _, p := range n.Pods {
			pods = append(pods, p.Name)
		}
		slices.Sort(pods)
		var ports []string
		for _, hp := range n.HostPorts {
			ports = append(ports, fmt.Sprint(hp))
		}
		slices.Sort(ports)
		var sb strings.Builder
		fmt.Fprintf(&sb, "%s group=%q pods=%v count=%d cpu=%d mem=%d ports=%v taints=%v unschedulable=%v waits=%v alloc=%d", n.Name, n.NodeGroup, pods,
			n.PodCount(), n.Requested.MilliCPU, n.Requested.Memory, ports, n.Taints, n.Unschedulable, n.Waits, n.Allocatable.MilliCPU)
		var same []string
		for _, j := range s.NodesOfShape(n.Shape) {
			same = append(same, s.Nodes[j].Name)
		}
		if !slices.Contains(s.NodesOfShape(n.Shape), i) {
			fmt.Fprintf(&sb, " NOT-INDEXED-BY-SHAPE")
		}
		slices.Sort(same)
		fmt.Fprintf(&sb, " shape=%v", same)
		for _, c := range classes {
			st := predicates.Run(predicates.Default(), s, c, n)
			fmt.Fprintf(&sb, "\n  %s: %d %s", c.Example.Name, st.Code, st.Reason)
		}
		lines = append(lines, sb.String())
	}
	slices.Sort(lines)
	for _, g := range []string{"g", "h", ""} {
		u := s.Group(g)
		lines = append(lines, fmt.Sprintf("group %q nodes=%d cpu=%d", g, u.Nodes, u.Capacity.MilliCPU))
	}
	total := s.Total()
	lines = append(lines, fmt.Sprintf("total cpu=%d nodes=%d", total.MilliCPU, s.TotalNodes()), fmt.Sprintf("templates=%d", len(s.Templates())))
	live := map[string]int{}
	for _, c := range s.Classes() {
		if c.Placed() > 0 {
			live[fmt.Sprintf("%v %v", c.Labels, c.Base)] += c.Placed()
		}
	}
	lines = append(lines, fmt.Sprint("placed by class ", live))
	return strings.Join(lines, "\n")
}

// planOn does to s what a round does: probe pods classified and placed,
// a planned node added, base pods moved off, a node cordoned, templates
// and limits set.
func planOn(t *testing.T, r *rand.Rand, s *snapshot.Snapshot) {
	t.Helper()
	s.SetTemplates([]*snapshot.Node{template("zone-a"), template("zone-c")})
	s.SetLimits("g", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")})
	s.DisableTemplate(s.Templates()[0])
	planned := &snapshot.Node{Node: b.Node("planned", "8", "32Gi", b.NodeLabels(v1alpha1.LabelZone, "zone-c")), NodeGroup: "g", Planned: true,
		Allocatable: snapshot.Resources{MilliCPU: 8000, Memory: 32 << 30}, AllowedPods: 110}
	s.AddNode(planned)
	// A planned node named as an existing one (planned nodes are named
	// new-1, new-2, ...; a cluster may have a node of that name).
	twin := &snapshot.Node{Node: b.Node(s.Nodes[0].Name, "8", "32Gi"), NodeGroup: "g", Planned: true,
		Allocatable: snapshot.Resources{MilliCPU: 8000, Memory: 32 << 30}, AllowedPods: 110}
	s.AddNode(twin)
	pods := append(probes()[:6], b.Pod("rack-spread", b.Labels("app", "web"), b.Spread("rack", 1, "app", "web")))
	r.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	for _, p := range pods {
		p.Labels = map[string]string{"app": []string{"web", "cache", "new"}[r.Intn(3)]}
		cl, err := s.Classify(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Prepare(cl)
		s.BlockingAnti(cl)
		s.AddPod(&snapshot.Pod{Pod: p, Class: cl}, s.Nodes[r.Intn(len(s.Nodes))])
	}
	for _, n := range s.Nodes {
		if len(n.Pods) > 0 && r.Intn(2) == 0 {
			s.RemovePod(n.Pods[0])
		}
	}
	s.Cordon(s.Nodes[r.Intn(len(s.Nodes))])
	_ = s.WithFork(func() (bool, error) {
		s.Cordon(s.Nodes[0])
		return true, nil // committed into the round's fork: Release undoes it too
	})
}

// TestBaseIsBuiltAnewAfterARoundPanics: a round that panics may have cut
// a change short before the journal recorded it, so the next round does
// not trust the base: it builds the model from scratch, and the panic
// still reaches the caller.
func TestBaseIsBuiltAnewAfterARoundPanics(t *testing.T) {
	c := newEventCluster(rand.New(rand.NewSource(1)))
	base := snapshot.NewBase()
	s, err := base.Snapshot(c.input())
	if err != nil {
		t.Fatal(err)
	}
	base.Release(s)
	recovered := func() (r any) {
		defer func() { r = recover() }()
		s, err := base.Snapshot(c.input())
		if err != nil {
			t.Fatal(err)
		}
		defer base.Release(s)
		s.Cordon(s.Nodes[0])
		panic("cut short")
	}()
	if recovered != "cut short" {
		t.Fatalf("the round's panic reached the caller as %v", recovered)
	}
	s, err = base.Snapshot(c.input())
	if err != nil {
		t.Fatal(err)
	}
	defer base.Release(s)
	if base.Builds != 2 {
		t.Errorf("after a round panicked the base was built %d times (%d brought up to date), want a second build", base.Builds, base.Syncs)
	}
	if diff := cmp.Diff(observeAnyOrder(t, build(t, c.input())), observeAnyOrder(t, s)); diff != "" {
		t.Errorf("the base after the panic differs (-scratch +base):\n%s", diff)
	}
}

// changeWatch gives each round the pods that changed since the last, as
// a controller's informer events name them and it reads them when it
// takes them: the pod now, or nil once deleted, and now and then a pod
// whose events changed nothing. Some rounds get no changes, or changes
// that do not take up where the last ones ended: the base then looks at
// every pod. A round after a pod was changed in place (no informer does
// that) gets none.
type changeWatch struct {
	seq  uint64
	last map[types.NamespacedName]*corev1.Pod
}

func (w *changeWatch) changes(r *rand.Rand, c *eventCluster) *snapshot.PodChanges {
	now := map[types.NamespacedName]*corev1.Pod{}
	for _, p := range c.pods {
		now[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	ch := &snapshot.PodChanges{From: w.seq, To: w.seq + 1, Pods: map[types.NamespacedName]*corev1.Pod{}}
	w.seq++
	for key, p := range now {
		if w.last[key] != p || r.Intn(8) == 0 {
			ch.Pods[key] = p
		}
	}
	for key := range w.last {
		if now[key] == nil {
			ch.Pods[key] = nil
		}
	}
	w.last = now
	switch inPlace := c.inPlace; {
	case inPlace:
		c.inPlace = false
		return nil
	case r.Intn(10) == 0:
		return nil
	case r.Intn(10) == 0:
		ch.From += 3 // changes went missing
	}
	return ch
}

// held are pods planned for one round where they are nominated.
func (c *eventCluster) held(r *rand.Rand) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range r.Intn(3) {
		p := b.Pod(fmt.Sprintf("held-%d", i), b.Labels("app", "web"), b.CPU("200m"))
		c.bind(r, p)
		out = append(out, p)
	}
	return out
}

// TestADrainsShapesDoNotMakeTheBaseBuildAnew: on 100 nodes with a label
// of their own (each its own shape), every round tries each node tainted
// as a drain would (the shapes those make are empty once the round is
// reverted), and one node leaves the cluster between rounds. The base
// still brings its model up to date: the drain's shapes are not counted
// as shapes of nodes gone.
func TestADrainsShapesDoNotMakeTheBaseBuildAnew(t *testing.T) {
	taint := corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule}
	var nodes []snapshot.NodeInput
	for i := range 100 {
		n := b.Node(fmt.Sprintf("n%03d", i), "4", "16Gi", b.NodeLabels("only", fmt.Sprint(i)))
		n.UID = types.UID(n.Name)
		nodes = append(nodes, snapshot.NodeInput{Node: n})
	}
	base := snapshot.NewBase()
	for range 6 {
		s, err := base.Snapshot(snapshot.Input{Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range s.Nodes {
			s.Fork()
			s.Cordon(n)
			s.Taint(n, taint)
			s.Revert()
		}
		base.Release(s)
		nodes = nodes[:len(nodes)-1]
	}
	if base.Builds != 1 {
		t.Errorf("the base was built %d times in 6 rounds (%d brought up to date), want once", base.Builds, base.Syncs)
	}
}
