package scaleup_test

// A port of Karpenter's topology suite
// (pkg/controllers/provisioning/scheduling/topology_test.go) to berth's
// planner. A NodePool is one or more NodeGroups over Karpenter's default
// fake catalogue (default/small/arm/single-pod instance types; spot in
// test-zone-1 and -2, on-demand in all three zones); a NodePool
// requirement on zone or capacity type filters the offerings, a
// requirement with several values of a custom label is one group per
// value. karpenter.sh/capacity-type is berth.dev/capacity-type. Each
// ExpectProvisioned is a round: berth's plan is "applied" (new nodes
// become Ready nodes with the labels berth gives them, placed pods are
// bound) before the next round, as Karpenter's test binds them.
//
// Every round is also checked against the constraints themselves, as
// kube-scheduler sees the nodes once they exist (ktCheckScheduler):
// DoNotSchedule spreads (skew per pod as if it were bound last,
// minDomains, nodeAffinityPolicy/nodeTaintsPolicy, matchLabelKeys),
// required pod (anti-)affinity both ways, taints, node affinity and
// capacity (iselCheckPlan).

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

const (
	ktZ1, ktZ2, ktZ3 = "test-zone-1", "test-zone-2", "test-zone-3"
	ktCT             = v1alpha1.LabelCapacityType
	ktZone           = v1alpha1.LabelZone
	ktHost           = v1alpha1.LabelHostname
	ktArch           = v1alpha1.LabelArch
)

var ktLabels = map[string]string{"test": "test"}

// ktOffer keeps an offering (zone, capacity type) of an instance type.
type ktOffer func(it, zone, ct string) bool

func ktZones(zones ...string) ktOffer {
	return func(_, z, _ string) bool { return slices.Contains(zones, z) }
}

func ktCTs(cts ...string) ktOffer {
	return func(_, _, c string) bool { return slices.Contains(cts, c) }
}

func ktArchOnly(arch string) ktOffer {
	return func(it, _, _ string) bool { return (it == "arm-instance-type") == (arch == "arm64") }
}

// ktTypes is Karpenter's fake default catalogue (no GPU types), kept by keep.
func ktTypes(keep ktOffer) []v1alpha1.InstanceType {
	type def struct{ name, cpu, mem, arch, pods string }
	defs := []def{
		{"default-instance-type", "4", "4Gi", "amd64", "5"},
		{"small-instance-type", "2", "2Gi", "amd64", "5"},
		{"arm-instance-type", "16", "128Gi", "arm64", "5"},
		{"single-pod-instance-type", "4", "4Gi", "amd64", "1"},
	}
	offs := [][2]string{{ktZ1, "spot"}, {ktZ2, "spot"}, {ktZ1, "on-demand"}, {ktZ2, "on-demand"}, {ktZ3, "on-demand"}}
	var out []v1alpha1.InstanceType
	for _, d := range defs {
		var os []v1alpha1.Offering
		for _, o := range offs {
			if keep == nil || keep(d.name, o[0], o[1]) {
				os = append(os, v1alpha1.Offering{Zone: o[0], CapacityType: v1alpha1.CapacityType(o[1]), PricePerHour: iselPriceStr(iselKPrice(d.cpu, d.mem))})
			}
		}
		if len(os) == 0 {
			continue
		}
		it := iselKType(d.name, d.cpu, d.mem, d.arch, os...)
		it.Capacity[corev1.ResourcePods] = resource.MustParse(d.pods)
		out = append(out, it)
	}
	return out
}

func ktGroup(name string, keep ktOffer, opts ...b.NodeGroupOption) *v1alpha1.NodeGroup {
	ng := iselKGroup(name, ktTypes(keep), opts...)
	ng.UID = types.UID("uid-ng-" + name)
	return ng
}

// ktBooting makes the nodes a round launches still booting in the next
// (not Ready, never initialized), as Karpenter's in-flight NodeClaims.
var ktBooting bool

// ---------------------------------------------------------------------------
// Pods.

type ktPodOpt = b.PodOption

func ktTSC(key string, skew int32, when corev1.UnsatisfiableConstraintAction, sel map[string]string, mod ...func(*corev1.TopologySpreadConstraint)) ktPodOpt {
	c := corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: skew, WhenUnsatisfiable: when}
	if sel != nil {
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	for _, m := range mod {
		m(&c)
	}
	return b.SpreadConstraint(c)
}

func ktDNS(key string, skew int32, mod ...func(*corev1.TopologySpreadConstraint)) ktPodOpt {
	return ktTSC(key, skew, corev1.DoNotSchedule, ktLabels, mod...)
}

func ktMinDomains(n int32) func(*corev1.TopologySpreadConstraint) {
	return func(c *corev1.TopologySpreadConstraint) { c.MinDomains = &n }
}

func ktLabelsOpt(m map[string]string) ktPodOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for k, v := range m {
			p.Labels[k] = v
		}
	}
}

func ktReq(reqs ...corev1.NodeSelectorRequirement) ktPodOpt {
	return b.RequireNodeAffinity(b.Term(reqs...))
}

func ktAff(key string, sel map[string]string, mod ...func(*corev1.PodAffinityTerm)) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
	for _, m := range mod {
		m(&t)
	}
	return t
}

func ktPreferPodAffinity(term corev1.PodAffinityTerm, anti bool) ktPodOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		w := corev1.WeightedPodAffinityTerm{Weight: 50, PodAffinityTerm: term}
		if anti {
			if p.Spec.Affinity.PodAntiAffinity == nil {
				p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, w)
			return
		}
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		p.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, w)
	}
}

func ktPreferNode(reqs ...corev1.NodeSelectorRequirement) ktPodOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.NodeAffinity == nil {
			p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := p.Spec.Affinity.NodeAffinity
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: 1, Preference: b.Term(reqs...)})
	}
}

// ---------------------------------------------------------------------------
// A cluster planned round by round.

type ktCluster struct {
	t      *testing.T
	groups []*v1alpha1.NodeGroup
	nodes  []*corev1.Node
	bound  []*corev1.Pod
	extra  scaleup.Input // namespaces, claims, volumes
	round  int
	seq    int
	last   *scaleup.Plan
	lastOK map[string]bool // pods placed by the last round
	base   *snapshot.Base  // kept from round to round, as the controller keeps it
}

func ktNew(t *testing.T, groups ...*v1alpha1.NodeGroup) *ktCluster {
	return &ktCluster{t: t, groups: groups, base: snapshot.NewBase()}
}

// pods are n pending pods made with opts, named uniquely.
func (c *ktCluster) pods(n int, opts ...ktPodOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for range n {
		c.seq++
		out = append(out, b.Pod(fmt.Sprintf("p%03d", c.seq), opts...))
	}
	return out
}

func (c *ktCluster) pod(opts ...ktPodOpt) *corev1.Pod { return c.pods(1, opts...)[0] }

// provision plans pending, checks the plan, and applies it.
func (c *ktCluster) provision(pending ...*corev1.Pod) *scaleup.Plan {
	t := c.t
	t.Helper()
	c.round++
	in := c.extra
	in.NodeGroups, in.Nodes, in.Pods, in.Pending = c.groups, c.nodes, c.bound, pending
	plan, err := scaleup.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	c.last = plan
	// The same round on the model kept from the previous rounds.
	in.Base = c.base
	if again, err := scaleup.Run(in); err != nil {
		t.Fatal(err)
	} else if a, b := summary(plan), summary(again); !slices.Equal(a, b) {
		t.Errorf("round %d on a snapshot.Base kept from earlier rounds plans %v; afresh %v", c.round, b, a)
	}
	iselCheckPlan(t, c.groups, pending, plan)
	byName := map[string]*corev1.Pod{}
	for _, p := range pending {
		byName[p.Name] = p
	}
	c.lastOK = map[string]bool{}
	fresh := map[string]bool{}
	bind := func(ref scaleup.PodRef, node string) {
		p := byName[ref.Name].DeepCopy()
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		c.bound = append(c.bound, p)
		c.lastOK[p.Name] = true
		fresh[p.Name] = true
	}
	for _, n := range plan.NewNodes {
		var ng *v1alpha1.NodeGroup
		for _, g := range c.groups {
			if g.Name == n.NodeGroup {
				ng = g
			}
		}
		it, off := ng.FindOffering(n.InstanceType, n.Zone, v1alpha1.CapacityType(n.CapacityType))
		name := fmt.Sprintf("r%d-%s", c.round, n.Name)
		node := b.Node(name, it.Capacity.Cpu().String(), it.Capacity.Memory().String(), b.LaunchedBy(ng),
			b.NodeAllocatable(corev1.ResourcePods, it.Capacity.Pods().String()))
		for k, v := range ng.NodeLabels(it, off) {
			node.Labels[k] = v
		}
		node.Labels[ktHost] = name
		if ktBooting {
			b.Booting()(node)
		}
		for _, tn := range ng.Spec.Template.Taints {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: tn.Key, Value: tn.Value, Effect: corev1.TaintEffect(tn.Effect)})
		}
		c.nodes = append(c.nodes, node)
		for _, r := range n.Pods {
			bind(r, name)
		}
	}
	for _, pl := range plan.ExistingNodePlacements {
		bind(pl.Pod, pl.Node)
	}
	ktCheckScheduler(t, c.nodes, c.bound, fresh)
	return plan
}

// scheduled fails t unless every pod was placed by the last round.
func (c *ktCluster) scheduled(pods ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range pods {
		if !c.lastOK[p.Name] {
			c.t.Errorf("pod %s not scheduled; plan %v", p.Name, summary(c.last))
		}
	}
}

func (c *ktCluster) notScheduled(pods ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range pods {
		if c.lastOK[p.Name] {
			c.t.Errorf("pod %s scheduled, Karpenter expects it pending; plan %v", p.Name, summary(c.last))
		}
	}
}

func (c *ktCluster) nodeOf(p *corev1.Pod) *corev1.Node {
	for _, q := range c.bound {
		if q.Name == p.Name && q.Namespace == p.Namespace {
			for _, n := range c.nodes {
				if n.Name == q.Spec.NodeName {
					return n
				}
			}
		}
	}
	return nil
}

func (c *ktCluster) delete(keep func(p *corev1.Pod, n *corev1.Node) bool) {
	var out []*corev1.Pod
	for _, p := range c.bound {
		if keep(p, c.nodeOf(p)) {
			out = append(out, p)
		}
	}
	c.bound = out
}

// skew is ExpectSkew: pods of namespace ns ("" any) matching sel (nil:
// all) per domain of key (hostname: the node), sorted.
func (c *ktCluster) skew(ns, key string, sel map[string]string) []int {
	m := map[string]int{}
	for _, p := range c.bound {
		if ns != "" && p.Namespace != ns {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if sel != nil && !labels.SelectorFromSet(sel).Matches(labels.Set(p.Labels)) {
			continue
		}
		n := c.nodeOf(p)
		if n == nil {
			continue
		}
		if key == ktHost {
			m[n.Name]++
		} else if v, ok := n.Labels[key]; ok {
			m[v]++
		}
	}
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

func (c *ktCluster) expectSkew(key string, want ...int) {
	c.t.Helper()
	c.expectSkewSel("default", key, ktLabels, want...)
}

func (c *ktCluster) expectSkewSel(ns, key string, sel map[string]string, want ...int) {
	c.t.Helper()
	sort.Ints(want)
	if got := c.skew(ns, key, sel); !slices.Equal(got, want) {
		c.t.Errorf("skew over %s: got %v, Karpenter expects %v; last plan %v", key, got, want, summary(c.last))
	}
}

func (c *ktCluster) expectMaxPerDomain(key string, max int) {
	c.t.Helper()
	for _, v := range c.skew("default", key, ktLabels) {
		if v > max {
			c.t.Errorf("skew over %s: %v has a domain above %d; last plan %v", key, c.skew("default", key, ktLabels), max, summary(c.last))
			return
		}
	}
}

func (c *ktCluster) newNodes() int { return len(c.last.NewNodes) }

// ---------------------------------------------------------------------------
// kube-scheduler's view once the nodes exist.

func ktTolerates(tols []corev1.Toleration, tn corev1.Taint) bool {
	for _, t := range tols {
		if t.Effect != "" && t.Effect != tn.Effect {
			continue
		}
		if t.Key == "" && t.Operator == corev1.TolerationOpExists {
			return true
		}
		if t.Key != tn.Key {
			continue
		}
		if t.Operator == corev1.TolerationOpExists || t.Value == tn.Value {
			return true
		}
	}
	return false
}

func ktTaintsOK(p *corev1.Pod, n *corev1.Node) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !ktTolerates(p.Spec.Tolerations, tn) {
			return false
		}
	}
	return true
}

func ktActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func ktTermMatches(owner *corev1.Pod, term corev1.PodAffinityTerm, q *corev1.Pod) bool {
	if term.NamespaceSelector != nil {
		// The cases here use only the empty selector (all namespaces).
		if len(term.NamespaceSelector.MatchLabels) > 0 || len(term.NamespaceSelector.MatchExpressions) > 0 {
			panic("namespaceSelector not modelled")
		}
	} else {
		nss := term.Namespaces
		if len(nss) == 0 {
			nss = []string{owner.Namespace}
		}
		if !slices.Contains(nss, q.Namespace) {
			return false
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(q.Labels))
}

// ktCheckScheduler fails t where a pod placed this round (fresh) would be
// refused by kube-scheduler with every node of the plan in place.
func ktCheckScheduler(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, fresh map[string]bool) {
	t.Helper()
	nodeBy := map[string]*corev1.Node{}
	for _, n := range nodes {
		nodeBy[n.Name] = n
	}
	var active []*corev1.Pod
	for _, p := range pods {
		if ktActive(p) && nodeBy[p.Spec.NodeName] != nil {
			active = append(active, p)
		}
	}
	for _, p := range active {
		if !fresh[p.Name] {
			continue
		}
		node := nodeBy[p.Spec.NodeName]
		if !ktTaintsOK(p, node) {
			t.Errorf("kube-scheduler: pod %s on %s does not tolerate its taints %v", p.Name, node.Name, node.Spec.Taints)
		}
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); !ok {
			t.Errorf("kube-scheduler: pod %s on %s: node affinity does not match", p.Name, node.Name)
		}
		// Topology spread.
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			sel := labels.Nothing()
			if c.LabelSelector != nil {
				ls := c.LabelSelector.DeepCopy()
				for _, k := range c.MatchLabelKeys {
					if v, ok := p.Labels[k]; ok {
						ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
					}
				}
				s, err := metav1.LabelSelectorAsSelector(ls)
				if err != nil {
					t.Fatal(err)
				}
				sel = s
			}
			dom, ok := node.Labels[c.TopologyKey]
			if !ok {
				t.Errorf("kube-scheduler: pod %s on %s: node has no %s", p.Name, node.Name, c.TopologyKey)
				continue
			}
			counts := map[string]int{}
			for _, n := range nodes {
				v, ok := n.Labels[c.TopologyKey]
				if !ok {
					continue
				}
				if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
					if m, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !m {
						continue
					}
				}
				if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor && !ktTaintsOK(p, n) {
					continue
				}
				if _, seen := counts[v]; !seen {
					counts[v] = 0
				}
				for _, q := range active {
					if q.Spec.NodeName == n.Name && q.Namespace == p.Namespace && q.Name != p.Name && sel.Matches(labels.Set(q.Labels)) {
						counts[v]++
					}
				}
			}
			minC := -1
			for _, v := range counts {
				if minC < 0 || v < minC {
					minC = v
				}
			}
			if c.MinDomains != nil && int32(len(counts)) < *c.MinDomains {
				minC = 0
			}
			self := 0
			if sel.Matches(labels.Set(p.Labels)) {
				self = 1
			}
			if skew := counts[dom] + self - minC; skew > int(c.MaxSkew) {
				t.Errorf("kube-scheduler: pod %s in %s=%s: skew %d > maxSkew %d (counts without it %v)", p.Name, c.TopologyKey, dom, skew, c.MaxSkew, counts)
			}
		}
		// Anti-affinity, both ways.
		same := func(q *corev1.Pod, key string) bool {
			a, b := node.Labels[key], nodeBy[q.Spec.NodeName].Labels[key]
			_, ok1 := node.Labels[key]
			_, ok2 := nodeBy[q.Spec.NodeName].Labels[key]
			return ok1 && ok2 && a == b
		}
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				for _, q := range active {
					if q.Name != p.Name && same(q, term.TopologyKey) && ktTermMatches(p, term, q) {
						t.Errorf("kube-scheduler: pod %s (on %s) has anti-affinity to %s (on %s) by %s", p.Name, node.Name, q.Name, q.Spec.NodeName, term.TopologyKey)
					}
				}
			}
		}
		for _, q := range active {
			if q.Name == p.Name || fresh[q.Name] || q.Spec.Affinity == nil || q.Spec.Affinity.PodAntiAffinity == nil {
				continue
			}
			for _, term := range q.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if same(q, term.TopologyKey) && ktTermMatches(q, term, p) {
					t.Errorf("kube-scheduler: bound pod %s's anti-affinity (%s) refuses pod %s on %s", q.Name, term.TopologyKey, p.Name, node.Name)
				}
			}
		}
		// Affinity.
		if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
			for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if _, ok := node.Labels[term.TopologyKey]; !ok {
					t.Errorf("kube-scheduler: pod %s on %s: node has no %s for its affinity", p.Name, node.Name, term.TopologyKey)
					continue
				}
				inDomain, elsewhere, before := false, map[string]bool{}, false
				for _, q := range active {
					if q.Name == p.Name || !ktTermMatches(p, term, q) {
						continue
					}
					if !fresh[q.Name] {
						before = true
					}
					if same(q, term.TopologyKey) {
						inDomain = true
					} else {
						elsewhere[nodeBy[q.Spec.NodeName].Labels[term.TopologyKey]] = true
					}
				}
				self := ktTermMatches(p, term, p)
				switch {
				case !inDomain && (!self || before || len(elsewhere) > 0):
					t.Errorf("kube-scheduler: pod %s on %s: no pod its affinity (%s) selects in its domain", p.Name, node.Name, term.TopologyKey)
				case inDomain && self && len(elsewhere) > 0:
					// Several domains of self-matching pods: the first pod
					// bound in the second finds matches only elsewhere,
					// unless a pod other than these founds its domain.
					founded := before
					for _, q := range active {
						if q.Name != p.Name && same(q, term.TopologyKey) && ktTermMatches(p, term, q) && !ktSameAffinity(q, term) {
							founded = true
						}
					}
					if !founded && !ktOneFounder(active, nodeBy, p, term, fresh) {
						t.Errorf("kube-scheduler: pod %s on %s: its self-matching affinity (%s) group is split over domains %v and its own; only one can be founded", p.Name, node.Name, term.TopologyKey, elsewhere)
					}
				}
			}
		}
	}
}

func ktSameAffinity(q *corev1.Pod, term corev1.PodAffinityTerm) bool {
	if q.Spec.Affinity == nil || q.Spec.Affinity.PodAffinity == nil {
		return false
	}
	for _, t := range q.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if fmt.Sprint(t) == fmt.Sprint(term) {
			return true
		}
	}
	return false
}

// ktOneFounder: of the domains holding pods of p's term, at most one is
// made only of fresh pods with that same self-matching term.
func ktOneFounder(active []*corev1.Pod, nodeBy map[string]*corev1.Node, p *corev1.Pod, term corev1.PodAffinityTerm, fresh map[string]bool) bool {
	onlySelf := map[string]bool{}
	for _, q := range active {
		if !ktTermMatches(p, term, q) {
			continue
		}
		d := nodeBy[q.Spec.NodeName].Labels[term.TopologyKey]
		if _, ok := onlySelf[d]; !ok {
			onlySelf[d] = true
		}
		if !fresh[q.Name] || !ktSameAffinity(q, term) {
			onlySelf[d] = false
		}
	}
	n := 0
	for _, v := range onlySelf {
		if v {
			n++
		}
	}
	return n <= 1 && len(onlySelf) == n // founder domains only if nothing else holds a match
}

// ---------------------------------------------------------------------------
// Cases.

var (
	kt11 = b.CPU("1.1")
	ktL  = ktLabelsOpt(ktLabels)
	s2   = map[string]string{"security": "s2"}
)

func ktDefault() *v1alpha1.NodeGroup { return ktGroup("default", nil) }

func TestKarpenterTopologyGeneral(t *testing.T) {
	t.Run("should ignore unknown topology keys (:61)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p0 := c.pod(ktL, ktDNS("unknown", 1))
		p1 := c.pod()
		c.provision(p0, p1)
		c.notScheduled(p0)
		c.scheduled(p1)
	})
	t.Run("should not spread when a nil label selector is defined (:95)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(2, ktL, ktTSC(ktZone, 1, corev1.DoNotSchedule, nil))...)
		c.expectSkewSel("default", ktZone, nil, 2)
	})
}

func TestKarpenterTopologyZonal(t *testing.T) {
	balance := func(name string, groups func() []*v1alpha1.NodeGroup, opt ktPodOpt, want ...int) {
		t.Run(name, func(t *testing.T) {
			c := ktNew(t, groups()...)
			c.provision(c.pods(4, ktL, opt)...)
			c.expectSkew(ktZone, want...)
		})
	}
	one := func(g *v1alpha1.NodeGroup) func() []*v1alpha1.NodeGroup {
		return func() []*v1alpha1.NodeGroup { return []*v1alpha1.NodeGroup{g} }
	}
	balance("should balance pods across zones (match labels) (:111)", one(ktDefault()), ktDNS(ktZone, 1), 1, 1, 2)
	balance("should balance pods across zones (match expressions) (:124)", one(ktDefault()), b.SpreadConstraint(corev1.TopologySpreadConstraint{
		TopologyKey: ktZone, MaxSkew: 1, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "test", Operator: metav1.LabelSelectorOpIn, Values: []string{"test"}}}},
	}), 1, 1, 2)
	balance("should respect NodePool zonal constraints (:145)", one(ktGroup("np", ktZones(ktZ1, ktZ2, ktZ3))), ktDNS(ktZone, 1), 1, 1, 2)
	balance("should respect NodePool zonal constraints (subset) with requirements (:160)", one(ktGroup("np", ktZones(ktZ1, ktZ2))), ktDNS(ktZone, 1), 2, 2)
	balance("should respect NodePool zonal constraints (subset) with labels (:176)", one(ktGroup("np", ktZones(ktZ1))), ktDNS(ktZone, 1), 4)
	balance("should respect NodePool zonal constraints (subset) with requirements and labels (:191)", one(ktGroup("np", ktZones(ktZ1))), ktDNS(ktZone, 1), 4)
	balance("should respect NodePool zonal constraints (subset) with labels across NodePools (:207)", func() []*v1alpha1.NodeGroup {
		return []*v1alpha1.NodeGroup{ktGroup("np", ktZones(ktZ1)), ktGroup("np2", ktZones(ktZ2))}
	}, ktDNS(ktZone, 1), 2, 2)

	t.Run("should respect NodePool zonal constraints (existing pod) (:235)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p := c.pod(ktL, kt11, b.NodeSelector(ktZone, ktZ3))
		c.provision(p)
		c.scheduled(p)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktZones(ktZ1, ktZ2))}
		c.provision(c.pods(6, ktL, kt11, ktDNS(ktZone, 1))...)
		c.expectSkew(ktZone, 1, 2, 2)
	})
	t.Run("should schedule to the non-minimum domain if its all that's available (:269)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1)))
		c.provision(c.pod(ktL, kt11, ktDNS(ktZone, 5)))
		c.expectSkew(ktZone, 1)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktZones(ktZ2))}
		c.provision(c.pod(ktL, kt11, ktDNS(ktZone, 5)))
		c.expectSkew(ktZone, 1, 1)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktZones(ktZ3))}
		c.provision(c.pods(10, ktL, kt11, ktDNS(ktZone, 5))...)
		c.expectSkew(ktZone, 1, 1, 6)
	})
	t.Run("should only schedule to minimum domains if already violating max skew (:311)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(9, ktL, kt11, ktDNS(ktZone, 1))...)
		c.expectSkew(ktZone, 3, 3, 3)
		c.delete(func(p *corev1.Pod, n *corev1.Node) bool { return n.Labels[ktZone] == ktZ1 })
		c.expectSkew(ktZone, 3)
		c.provision(c.pods(3, ktL, kt11, ktDNS(ktZone, 1))...)
		c.expectSkew(ktZone, 1, 2, 3)
	})
	t.Run("should not violate max-skew when unsat = do not schedule (:350)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1)))
		c.provision(c.pod(ktL, kt11, ktDNS(ktZone, 1)))
		c.expectSkew(ktZone, 1)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktZones(ktZ2, ktZ3))}
		c.provision(c.pods(10, ktL, kt11, ktDNS(ktZone, 1))...)
		c.expectSkew(ktZone, 1, 2, 2)
	})
	t.Run("should not violate max-skew when unsat = do not schedule (discover domains) (:383)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1)))
		c.provision(c.pod(ktL, kt11))
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktZones(ktZ2, ktZ3))}
		c.provision(c.pods(10, ktL, kt11, ktDNS(ktZone, 1))...)
		c.expectSkew(ktZone, 1, 2, 2)
	})
	countOnly := func(name, key, v1, v2 string, want ...int) {
		t.Run(name, func(t *testing.T) {
			c := ktNew(t, ktDefault())
			first := b.Node("first", "4", "4Gi", b.NodeLabels(key, v1))
			second := b.Node("second", "4", "4Gi", b.NodeLabels(key, v2))
			third := b.Node("third", "4", "4Gi")
			c.nodes = []*corev1.Node{first, second, third}
			on := func(n string, opts ...ktPodOpt) *corev1.Pod { return boundTo(c.pod(opts...), n) }
			failed, succeeded := on("first", ktL), on("first", ktL)
			failed.Status.Phase, succeeded.Status.Phase = corev1.PodFailed, corev1.PodSucceeded
			c.bound = []*corev1.Pod{
				on("first"),      // missing labels
				on("third", ktL), // no domain on node
				on("first", ktL, b.Namespace("wrong-ns")), // wrong namespace
				failed, succeeded,
				on("first", ktL), on("first", ktL), on("second", ktL),
			}
			c.provision(c.pods(2, ktL, ktDNS(key, 1))...)
			c.expectSkew(key, want...)
		})
	}
	countOnly("should only count running/scheduled pods with matching labels scheduled to nodes with a corresponding domain (:415)", ktZone, ktZ1, ktZ2, 1, 2, 2)
	t.Run("should match all pods when labelSelector is not specified (:448)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pod())
		c.expectSkewSel("default", ktZone, nil, 1)
	})
	t.Run("should handle interdependent selectors (:460)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(5, ktDNS(ktHost, 1))...)
		if c.newNodes() != 1 || len(c.last.Unschedulable) > 0 {
			t.Errorf("want the 5 pods on one node; plan %v", summary(c.last))
		}
	})
	t.Run("should respect minDomains constraints (:485)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2)))
		c.provision(c.pods(3, ktL, ktDNS(ktZone, 1, ktMinDomains(3)))...)
		c.expectSkew(ktZone, 1, 1)
	})
	t.Run("satisfied minDomains constraints (equal) should allow expected pod scheduling (:505)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2, ktZ3)))
		c.provision(c.pods(11, ktL, ktDNS(ktZone, 1, ktMinDomains(3)))...)
		c.expectSkew(ktZone, 4, 4, 3)
	})
	t.Run("satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling (:525)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2, ktZ3)))
		c.provision(c.pods(11, ktL, ktDNS(ktZone, 1, ktMinDomains(2)))...)
		c.expectSkew(ktZone, 4, 4, 3)
	})
}

func TestKarpenterTopologyHostname(t *testing.T) {
	t.Run("should balance pods across nodes (:548)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(4, ktL, ktDNS(ktHost, 1))...)
		c.expectSkew(ktHost, 1, 1, 1, 1)
	})
	t.Run("should balance pods on the same hostname up to maxskew (:561)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(4, ktL, ktDNS(ktHost, 4))...)
		c.expectSkew(ktHost, 4)
	})
	app := func(name string, opts ...ktPodOpt) []ktPodOpt {
		sel := map[string]string{"app": name}
		return append([]ktPodOpt{ktLabelsOpt(sel), ktTSC(ktHost, 1, corev1.DoNotSchedule, sel)}, opts...)
	}
	t.Run("balance multiple deployments with hostname topology spread (:574)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := append(c.pods(2, app("app1")...), c.pods(2, app("app2")...)...)
		c.provision(pods...)
		c.scheduled(pods...)
		if c.newNodes() != 2 {
			t.Errorf("want 2 nodes; plan %v", summary(c.last))
		}
	})
	t.Run("balance multiple deployments with hostname topology spread & varying arch (:610)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := append(c.pods(2, app("app1", ktReq(b.Expr(ktArch, corev1.NodeSelectorOpIn, "amd64")))...),
			c.pods(2, app("app2", ktReq(b.Expr(ktArch, corev1.NodeSelectorOpIn, "arm64")))...)...)
		c.provision(pods...)
		c.scheduled(pods...)
		if c.newNodes() != 4 {
			t.Errorf("want 4 nodes; plan %v", summary(c.last))
		}
	})
}

func TestKarpenterTopologyCapacityType(t *testing.T) {
	t.Run("should balance pods across capacity types (:656)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(4, ktL, ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 2, 2)
	})
	t.Run("should respect NodePool capacity type constraints (:669)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktCTs("spot", "on-demand")))
		c.provision(c.pods(4, ktL, ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 2, 2)
	})
	t.Run("should not violate max-skew when unsat = do not schedule (capacity type) (:684)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktCTs("spot")))
		c.provision(c.pod(ktL, kt11, ktDNS(ktCT, 1)))
		c.expectSkew(ktCT, 1)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktCTs("on-demand"))}
		c.provision(c.pods(5, ktL, kt11, ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 1, 2)
	})
	t.Run("should violate max-skew when unsat = schedule anyway (capacity type) (:719)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktCTs("spot")))
		c.provision(c.pod(ktL, kt11, ktTSC(ktCT, 1, corev1.ScheduleAnyway, ktLabels)))
		c.expectSkew(ktCT, 1)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktCTs("on-demand"))}
		c.provision(c.pods(5, ktL, kt11, ktTSC(ktCT, 1, corev1.ScheduleAnyway, ktLabels))...)
		c.expectSkew(ktCT, 1, 5)
	})
	t.Run("should only count running/scheduled pods with matching labels scheduled to nodes with a corresponding domain (:750)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.nodes = []*corev1.Node{b.Node("first", "4", "4Gi", b.NodeLabels(ktCT, "spot")), b.Node("second", "4", "4Gi", b.NodeLabels(ktCT, "on-demand")), b.Node("third", "4", "4Gi")}
		on := func(n string, opts ...ktPodOpt) *corev1.Pod { return boundTo(c.pod(opts...), n) }
		failed, succeeded := on("first", ktL), on("first", ktL)
		failed.Status.Phase, succeeded.Status.Phase = corev1.PodFailed, corev1.PodSucceeded
		c.bound = []*corev1.Pod{on("first"), on("third", ktL), on("first", ktL, b.Namespace("wrong-ns")), failed, succeeded,
			on("first", ktL), on("first", ktL), on("second", ktL)}
		c.provision(c.pods(2, ktL, ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 2, 3)
	})
	t.Run("should match all pods when labelSelector is not specified (:783)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pod())
		c.expectSkewSel("default", ktCT, nil, 1)
	})
	t.Run("should handle interdependent selectors (:795)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(5, ktDNS(ktHost, 1))...)
		if c.newNodes() != 1 || len(c.last.Unschedulable) > 0 {
			t.Errorf("want the 5 pods on one node; plan %v", summary(c.last))
		}
	})
	t.Run("should balance pods across capacity-types (node required affinity constrained) (:818)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p := c.pod(ktL, ktReq(b.Expr(ktZone, corev1.NodeSelectorOpIn, ktZ1), b.Expr(ktCT, corev1.NodeSelectorOpIn, "on-demand")))
		c.provision(p)
		c.scheduled(p)
		c.provision(c.pods(5, ktL, ktReq(b.Expr(ktZone, corev1.NodeSelectorOpIn, ktZ2), b.Expr(ktCT, corev1.NodeSelectorOpIn, "spot")), ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 1, 5)
	})
	t.Run("should balance pods across capacity-types (no constraints) (:855)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p := c.pod(ktL, b.NodeSelector(v1alpha1.LabelInstanceType, "single-pod-instance-type"), ktReq(b.Expr(ktCT, corev1.NodeSelectorOpIn, "on-demand")))
		c.provision(p)
		c.scheduled(p)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktCTs("spot"))}
		c.provision(c.pods(5, ktL, b.CPU("2"), ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 1, 2)
	})
	t.Run("should balance pods across arch (no constraints) (:898)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p := c.pod(ktL, b.NodeSelector(v1alpha1.LabelInstanceType, "single-pod-instance-type"), ktReq(b.Expr(ktArch, corev1.NodeSelectorOpIn, "amd64")))
		c.provision(p)
		c.scheduled(p)
		c.groups = []*v1alpha1.NodeGroup{ktGroup("default", ktArchOnly("arm64"))}
		c.provision(c.pods(5, ktL, b.CPU("2"), ktDNS(ktArch, 1))...)
		c.expectSkew(ktArch, 1, 2)
	})
}

func TestKarpenterTopologyCombined(t *testing.T) {
	t.Run("should spread pods while respecting both constraints (hostname and zonal) (:944)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		opts := []ktPodOpt{ktL, ktDNS(ktZone, 1), ktDNS(ktHost, 3)}
		for _, step := range []struct {
			n    int
			want []int
		}{{2, []int{1, 1}}, {3, []int{1, 2, 2}}, {5, []int{3, 3, 4}}, {11, []int{7, 7, 7}}} {
			c.provision(c.pods(step.n, opts...)...)
			c.expectSkew(ktZone, step.want...)
			c.expectMaxPerDomain(ktHost, 3)
		}
	})
	t.Run("should balance pods across NodePool requirements (:984)", func(t *testing.T) {
		var groups []*v1alpha1.NodeGroup
		for _, v := range []string{"2", "3", "4", "5"} {
			groups = append(groups, ktGroup("spot-"+v, ktCTs("spot"), b.TemplateLabel("capacity.spread.4-1", v)))
		}
		groups = append(groups, ktGroup("od-1", ktCTs("on-demand"), b.TemplateLabel("capacity.spread.4-1", "1")))
		c := ktNew(t, groups...)
		pods := c.pods(20, ktL, ktDNS("capacity.spread.4-1", 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew("capacity.spread.4-1", 4, 4, 4, 4, 4)
		c.expectSkew(ktCT, 4, 16)
	})
	t.Run("should spread pods while respecting both constraints (zone DNS, hostname ScheduleAnyway, disabled zone-3 pool) (:1052)", func(t *testing.T) {
		// Karpenter: 1,1 (the zone-3 NodePool at limit 0 still makes
		// zone-3 a domain). kube-scheduler, once the nodes exist, sees
		// zones 1 and 2 only and binds all ten 5/5: berth's documented
		// rule (a zone no node may be launched into this round is no
		// domain) follows kube-scheduler here.
		c := ktNew(t, ktGroup("np", ktZones(ktZ1, ktZ2)), ktGroup("npb", ktZones(ktZ3), b.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")})))
		pods := c.pods(10, ktL, ktDNS(ktZone, 1), ktTSC(ktHost, 1, corev1.ScheduleAnyway, ktLabels))
		c.provision(pods...)
		t.Logf("zones %v (Karpenter 1,1), hosts %v (Karpenter 1,1)", c.skew("default", ktZone, ktLabels), c.skew("default", ktHost, ktLabels))
	})
	t.Run("should spread pods while respecting both constraints (capacity type and hostname) (:1093)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		opts := []ktPodOpt{ktL, ktDNS(ktCT, 1), ktDNS(ktHost, 3)}
		for _, step := range []struct {
			n    int
			want []int
		}{{2, []int{1, 1}}, {3, []int{2, 3}}, {5, []int{5, 5}}, {11, []int{10, 11}}} {
			c.provision(c.pods(step.n, opts...)...)
			c.expectSkew(ktCT, step.want...)
			c.expectMaxPerDomain(ktHost, 3)
		}
	})
	t.Run("Combined Zonal and Capacity Type: should spread pods while respecting both constraints (:1665)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		opts := []ktPodOpt{ktL, ktDNS(ktCT, 1), ktDNS(ktZone, 1)}
		for _, step := range []struct{ n, maxCT, maxZone int }{{2, 1, 1}, {3, 3, 2}, {3, 5, 4}, {11, 11, 7}} {
			pods := c.pods(step.n, opts...)
			c.provision(pods...)
			c.expectMaxPerDomain(ktCT, step.maxCT)
			c.expectMaxPerDomain(ktZone, step.maxZone)
			if len(c.last.Unschedulable) > 0 {
				t.Logf("note: round of %d: %d pods left pending (Karpenter does not assert they schedule)", step.n, len(c.last.Unschedulable))
			}
		}
	})
	t.Run("Combined Hostname, Zonal, and Capacity Type: should spread pods while respecting all constraints (:1705)", func(t *testing.T) {
		groups := iselAssortedGroups(func(a iselAssortedType) bool { return a.os == "linux" })
		c := ktNew(t, groups...)
		opts := []ktPodOpt{ktL, ktDNS(ktCT, 1), ktDNS(ktZone, 2), ktDNS(ktHost, 3)}
		for i := 1; i < 15; i++ {
			pods := c.pods(i, opts...)
			c.provision(pods...)
			c.scheduled(pods...)
		}
	})
}

func TestKarpenterTopologyMatchLabelKeys(t *testing.T) {
	t.Run("should support matchLabelKeys (:1142)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		mlk := func(tc *corev1.TopologySpreadConstraint) { tc.MatchLabelKeys = []string{"test-label"} }
		pods := append(c.pods(2, ktL, ktLabelsOpt(map[string]string{"test-label": "value-a"}), ktDNS(ktHost, 1, mlk)),
			c.pods(2, ktL, ktLabelsOpt(map[string]string{"test-label": "value-b"}), ktDNS(ktHost, 1, mlk))...)
		c.provision(pods...)
		c.expectSkew(ktHost, 2, 2)
	})
	t.Run("should ignore unknown labels specified in matchLabelKeys (:1171)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		mlk := func(tc *corev1.TopologySpreadConstraint) { tc.MatchLabelKeys = []string{"test-label"} }
		c.provision(c.pods(4, ktL, ktDNS(ktHost, 1, mlk))...)
		c.expectSkew(ktHost, 1, 1, 1, 1)
	})
}

func TestKarpenterTopologyInclusionPolicies(t *testing.T) {
	ignore, honor := corev1.NodeInclusionPolicyIgnore, corev1.NodeInclusionPolicyHonor
	taints := func(p corev1.NodeInclusionPolicy) func(*corev1.TopologySpreadConstraint) {
		return func(tc *corev1.TopologySpreadConstraint) { tc.NodeTaintsPolicy = &p }
	}
	affinity := func(p corev1.NodeInclusionPolicy) func(*corev1.TopologySpreadConstraint) {
		return func(tc *corev1.TopologySpreadConstraint) { tc.NodeAffinityPolicy = &p }
	}
	taintedNodes := func() []*corev1.Node {
		var out []*corev1.Node
		for _, v := range []string{"foo", "bar"} {
			out = append(out, b.Node("node-"+v, "100m", "4Gi", b.NodeLabels("fake-label", v), b.NodeTaint("taintname", "taintvalue", corev1.TaintEffectNoSchedule)))
		}
		return out
	}
	t.Run("should balance pods across a label (NodeTaintsPolicy=ignore) (:1199)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.TemplateLabel("fake-label", "baz")))
		c.nodes = taintedNodes()
		c.provision(c.pods(5, ktL, b.CPU("1"), ktDNS("fake-label", 1, taints(ignore)))...)
		c.expectSkew("fake-label", 1)
	})
	t.Run("should balance pods across a label (NodeTaintsPolicy=honor) (:1270)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.TemplateLabel("fake-label", "baz")))
		c.nodes = taintedNodes()
		c.provision(c.pods(5, ktL, b.CPU("1"), ktDNS("fake-label", 1, taints(honor)))...)
		c.expectSkew("fake-label", 5)
	})
	t.Run("should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=ignore) (:1339)", func(t *testing.T) {
		// Karpenter: 1 (the tainted pool's "bar" is a domain). berth
		// documents that a group no pending pod may use (its taint is
		// not tolerated) gives no domain, as kube-scheduler sees no node
		// there: both pods on "foo".
		c := ktNew(t, ktGroup("foo", nil, b.TemplateLabel("fake-label", "foo")),
			ktGroup("bar", nil, b.TemplateLabel("fake-label", "bar"), b.TemplateTaint("taint-key", "taint-value", corev1.TaintEffectNoSchedule)))
		c.provision(c.pods(2, ktL, ktDNS("fake-label", 1, taints(ignore)))...)
		t.Logf("fake-label counts %v (Karpenter 1)", c.skew("default", "fake-label", ktLabels))
	})
	t.Run("should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=honor) (:1395)", func(t *testing.T) {
		c := ktNew(t, ktGroup("foo", nil, b.TemplateLabel("fake-label", "foo")),
			ktGroup("bar", nil, b.TemplateLabel("fake-label", "bar"), b.TemplateTaint("taint-key", "taint-value", corev1.TaintEffectNoSchedule)))
		c.provision(c.pods(2, ktL, ktDNS("fake-label", 1, taints(honor)))...)
		c.expectSkew("fake-label", 2)
	})
	t.Run("should balance pods across a label when mutually exclusive NodePools (by taints) share domains (NodeTaintsPolicy=honor) (:1451)", func(t *testing.T) {
		var groups []*v1alpha1.NodeGroup
		for i, doms := range [][]string{{"foo", "bar"}, {"foo", "baz"}} {
			for _, d := range doms {
				groups = append(groups, ktGroup(fmt.Sprintf("np%d-%s", i, d), nil, b.TemplateLabel("fake-label", d),
					b.TemplateTaint("taint-key", fmt.Sprintf("nodepool-%d", i), corev1.TaintEffectNoSchedule)))
			}
		}
		c := ktNew(t, groups...)
		pods := append(c.pods(2, ktL, ktDNS("fake-label", 1, taints(honor)), b.Tolerate("taint-key", "nodepool-0", corev1.TaintEffectNoSchedule)),
			c.pods(4, ktL, ktDNS("fake-label", 1, taints(honor)), b.Tolerate("taint-key", "nodepool-1", corev1.TaintEffectNoSchedule))...)
		c.provision(pods...)
		c.expectSkew("fake-label", 3, 2, 1)
	})
	affNodes := func() []*corev1.Node {
		var out []*corev1.Node
		for _, v := range []string{"foo", "bar"} {
			out = append(out, b.Node("node-"+v, "100m", "4Gi", b.NodeLabels("fake-label", v, "selector", "mismatch")))
		}
		return out
	}
	t.Run("should balance pods across a label (NodeAffinityPolicy=ignore) (:1532)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.TemplateLabel("fake-label", "baz"), b.TemplateLabel("selector", "value")))
		c.nodes = affNodes()
		c.provision(c.pods(5, ktL, b.CPU("1"), b.NodeSelector("selector", "value"), ktDNS("fake-label", 1, affinity(ignore)))...)
		c.expectSkew("fake-label", 1)
	})
	t.Run("should balance pods across a label (NodeAffinityPolicy=honor) (:1599)", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.TemplateLabel("fake-label", "baz"), b.TemplateLabel("selector", "value")))
		c.nodes = affNodes()
		c.provision(c.pods(5, ktL, b.CPU("1"), b.NodeSelector("selector", "value"), ktDNS("fake-label", 1, affinity(honor)))...)
		c.expectSkew("fake-label", 5)
	})
}

func TestKarpenterTopologyNodeAffinity(t *testing.T) {
	in := func(key string, v ...string) corev1.NodeSelectorRequirement {
		return b.Expr(key, corev1.NodeSelectorOpIn, v...)
	}
	t.Run("should limit spread options by nodeSelector (:1743)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(append(c.pods(5, ktL, ktDNS(ktZone, 1), b.NodeSelector(ktZone, ktZ1)), c.pods(10, ktL, ktDNS(ktZone, 1), b.NodeSelector(ktZone, ktZ2))...)...)
		c.expectSkew(ktZone, 5, 10)
	})
	t.Run("should limit spread options by node requirements (:1769)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(10, ktL, ktDNS(ktZone, 1), ktReq(in(ktZone, ktZ1, ktZ2)))...)
		c.expectSkew(ktZone, 5, 5)
	})
	t.Run("should limit spread options by required node affinity (:1791)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(6, ktL, ktDNS(ktZone, 1), ktReq(in(ktZone, ktZ1, ktZ2)))...)
		c.expectSkew(ktZone, 3, 3)
		c.provision(c.pod(ktL, ktDNS(ktZone, 1), ktReq(in(ktZone, ktZ2, ktZ3))))
		c.expectSkew(ktZone, 3, 3, 1)
		c.provision(c.pods(5, ktL, ktDNS(ktZone, 1))...)
		c.expectSkew(ktZone, 4, 4, 4)
	})
	t.Run("should not limit spread options by preferred node affinity (:1835)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(6, ktL, ktDNS(ktZone, 1), ktPreferNode(in(ktZone, ktZ1, ktZ2)))...)
		c.expectSkew(ktZone, 2, 2, 2)
	})
	t.Run("capacity type: should limit spread options by nodeSelector (:1860)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		sa := ktTSC(ktCT, 1, corev1.ScheduleAnyway, ktLabels)
		c.provision(append(c.pods(5, ktL, sa, b.NodeSelector(ktCT, "spot")), c.pods(5, ktL, sa, b.NodeSelector(ktCT, "on-demand"))...)...)
		c.expectSkew(ktCT, 5, 5)
	})
	t.Run("capacity type: should limit spread options by node affinity (capacity type) (:1884)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(3, ktL, ktDNS(ktCT, 1), ktReq(in(ktCT, "spot")))...)
		c.expectSkew(ktCT, 3)
		c.provision(c.pod(ktL, ktDNS(ktCT, 1), ktReq(in(ktCT, "on-demand", "spot"))))
		c.expectSkew(ktCT, 3, 1)
		c.provision(c.pods(5, ktL, ktDNS(ktCT, 1))...)
		c.expectSkew(ktCT, 5, 4)
	})
}

func TestKarpenterTopologyPodAffinity(t *testing.T) {
	in := func(key string, v ...string) corev1.NodeSelectorRequirement {
		return b.Expr(key, corev1.NodeSelectorOpIn, v...)
	}
	t.Run("should schedule a pod with empty pod affinity and anti-affinity (:1929)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p := c.pod(func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{}}
		})
		c.provision(p)
		c.scheduled(p)
	})
	t.Run("should respect pod affinity (hostname) (:1939)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(10, ktL, ktDNS(ktHost, 1))
		a1 := c.pod(ktLabelsOpt(s2))
		a2 := c.pod(b.PodAffinity(ktAff(ktHost, s2)))
		c.provision(append(pods, a1, a2)...)
		c.scheduled(a1, a2)
		if n1, n2 := c.nodeOf(a1), c.nodeOf(a2); n1 == nil || n2 == nil || n1.Name != n2.Name {
			t.Errorf("want the same node; plan %v", summary(c.last))
		}
	})
	t.Run("should respect pod affinity (arch) (:1973)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		tsc := ktTSC(ktHost, 1, corev1.DoNotSchedule, s2)
		a1 := c.pod(tsc, ktLabelsOpt(s2), b.CPU("2"), b.NodeSelector(ktArch, "arm64"))
		a2 := c.pod(tsc, ktLabelsOpt(s2), b.CPU("1"), b.PodAffinity(ktAff(ktArch, s2)))
		c.provision(a1, a2)
		c.scheduled(a1, a2)
		if n1, n2 := c.nodeOf(a1), c.nodeOf(a2); n1 == nil || n2 == nil || n1.Labels[ktArch] != n2.Labels[ktArch] || n1.Name == n2.Name {
			t.Errorf("want the same arch, different nodes; plan %v", summary(c.last))
		}
	})
	t.Run("should respect self pod affinity (hostname) (:2016)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(3, ktLabelsOpt(s2), b.PodAffinity(ktAff(ktHost, s2)))
		c.provision(pods...)
		c.scheduled(pods...)
		if c.newNodes() != 1 {
			t.Errorf("want one node; plan %v", summary(c.last))
		}
	})
	t.Run("should respect self pod affinity for first empty topology domain only (hostname) (:2040)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		mk := func() []*corev1.Pod { return c.pods(10, ktLabelsOpt(s2), b.PodAffinity(ktAff(ktHost, s2))) }
		c.provision(mk()...)
		if c.newNodes() != 1 || len(c.lastOK) != 5 || len(c.last.Unschedulable) != 5 {
			t.Errorf("want one node of 5 pods and 5 pending; plan %v", summary(c.last))
		}
		pods := mk()
		c.provision(pods...)
		c.notScheduled(pods...)
	})
	t.Run("should respect self pod affinity for first empty topology domain only (hostname/constrained zones) (:2082)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pod(ktLabelsOpt(s2), b.NodeSelector(ktZone, ktZ1), b.PodAffinity(ktAff(ktHost, s2))))
		pods := c.pods(10, ktLabelsOpt(s2), ktReq(in(ktZone, ktZ2, ktZ3)), b.PodAffinity(ktAff(ktHost, s2)))
		c.provision(pods...)
		c.notScheduled(pods...)
	})
	t.Run("should respect self pod affinity (zone) (:2126)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(3, ktLabelsOpt(s2), b.PodAffinity(ktAff(ktZone, s2)))
		c.provision(pods...)
		c.scheduled(pods...)
		if c.newNodes() != 1 {
			t.Errorf("want one node; plan %v", summary(c.last))
		}
	})
	t.Run("should respect self pod affinity (zone w/ constraint) (:2150)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(3, ktLabelsOpt(s2), b.PodAffinity(ktAff(ktZone, s2)), ktReq(in(ktZone, ktZ3)))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, s2, 3)
		if c.newNodes() != 1 {
			t.Errorf("want one node; plan %v", summary(c.last))
		}
	})
	t.Run("should allow two nodes to be created when two pods with matching affinities have incompatible selectors (:2181)", func(t *testing.T) {
		// Karpenter schedules both (zone-2 and zone-3); kube-scheduler binds
		// the first and then refuses the second (a matching pod exists,
		// in another zone). Checked only against kube-scheduler.
		c := ktNew(t, ktDefault())
		s1 := map[string]string{"security": "s1"}
		p1 := c.pod(ktLabelsOpt(s1), b.PodAffinity(ktAff(ktZone, s1)), ktReq(in(ktZone, ktZ2)))
		p2 := c.pod(ktLabelsOpt(s1), b.PodAffinity(ktAff(ktZone, s1)), ktReq(in(ktZone, ktZ3)))
		c.provision(p1, p2)
		t.Logf("plan %v (Karpenter: both, two nodes)", summary(c.last))
	})
	t.Run("should allow violation of preferred pod affinity (:2234)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		a2 := c.pod(ktPreferPodAffinity(ktAff(ktHost, s2), false))
		c.provision(append(c.pods(10, ktL, ktDNS(ktHost, 1)), a2)...)
		c.scheduled(a2)
	})
	t.Run("should allow violation of preferred pod anti-affinity (:2267)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		aff := c.pods(10, ktPreferPodAffinity(ktAff(ktZone, ktLabels), true))
		c.provision(append(c.pods(3, ktL, ktDNS(ktZone, 1)), aff...)...)
		c.scheduled(aff...)
	})
	t.Run("should separate nodes using simple pod anti-affinity on hostname (:2300)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		for range 10 {
			a1 := c.pod(ktLabelsOpt(s2))
			a2 := c.pod(b.PodAntiAffinity(ktAff(ktHost, s2)))
			c.provision(a2, a1)
			c.scheduled(a1, a2)
		}
	})
	zonePods := func(c *ktCluster, opts ...ktPodOpt) []*corev1.Pod {
		var out []*corev1.Pod
		for _, z := range []string{ktZ1, ktZ2, ktZ3} {
			out = append(out, c.pod(append([]ktPodOpt{b.CPU("2"), b.NodeSelector(ktZone, z)}, opts...)...))
		}
		return out
	}
	t.Run("should not violate pod anti-affinity on zone (:2322)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		zp := zonePods(c, ktLabelsOpt(s2))
		aff := c.pod(b.PodAntiAffinity(ktAff(ktZone, s2)))
		c.provision(append(zp, aff)...)
		// Karpenter (first fit descending) places the three zone pods and
		// leaves affPod pending. berth places affPod (constrained pods
		// first) in zone-1 on a small node and leaves the zone-1 pod
		// pending: as many pods, a cheaper plan, and kube-scheduler
		// accepts it. Either is right; one pod of {zone-1 pod, affPod}
		// must wait.
		c.scheduled(zp[1], zp[2])
		if c.lastOK[zp[0].Name] == c.lastOK[aff.Name] {
			t.Errorf("want exactly one of the zone-1 pod and affPod placed; plan %v", summary(c.last))
		}
	})
	t.Run("should not violate pod anti-affinity on zone (other schedules first) (:2361)", func(t *testing.T) {
		// Karpenter leaves affPod pending (it cannot know the zone of the
		// other pod's node); berth picks the zones itself, so placing
		// both in different zones is what kube-scheduler accepts.
		c := ktNew(t, ktDefault())
		p := c.pod(ktLabelsOpt(s2), b.CPU("2"))
		aff := c.pod(b.PodAntiAffinity(ktAff(ktZone, s2)))
		c.provision(p, aff)
		c.scheduled(p)
		t.Logf("plan %v (Karpenter: affPod pending)", summary(c.last))
	})
	t.Run("should not violate pod anti-affinity (arch) (:2383)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		tsc := ktTSC(ktHost, 1, corev1.DoNotSchedule, s2)
		a1 := c.pod(tsc, ktLabelsOpt(s2), b.CPU("2"), b.NodeSelector(ktArch, "arm64"))
		a2 := c.pod(tsc, ktLabelsOpt(s2), b.CPU("1"), b.PodAntiAffinity(ktAff(ktArch, s2)))
		c.provision(a1, a2)
		c.scheduled(a1, a2)
		if n1, n2 := c.nodeOf(a1), c.nodeOf(a2); n1 == nil || n2 == nil || n1.Labels[ktArch] == n2.Labels[ktArch] {
			t.Errorf("want different arch; plan %v", summary(c.last))
		}
	})
	t.Run("should violate preferred pod anti-affinity on zone (inverse) (:2426)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		zp := zonePods(c, ktPreferPodAffinity(ktAff(ktZone, s2), true))
		aff := c.pod(ktLabelsOpt(s2))
		c.provision(append(zp, aff)...)
		c.scheduled(append(zp, aff)...)
	})
	t.Run("should not violate pod anti-affinity on zone (inverse) (:2466)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		zp := zonePods(c, b.PodAntiAffinity(ktAff(ktZone, s2)))
		aff := c.pod(ktLabelsOpt(s2))
		c.provision(append(zp, aff)...)
		c.scheduled(zp...)
		c.notScheduled(aff)
	})
	t.Run("should not violate pod anti-affinity on zone (Schrödinger) (:2502)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		za := c.pod(b.PodAntiAffinity(ktAff(ktZone, s2)), b.CPU("2"))
		aff := c.pod(ktLabelsOpt(s2))
		c.provision(za, aff)
		c.scheduled(za)
		if !c.lastOK[aff.Name] { // Karpenter: second round
			c.provision(aff)
			c.scheduled(aff)
		}
		if n1, n2 := c.nodeOf(za), c.nodeOf(aff); n1 == nil || n2 == nil || n1.Labels[ktZone] == n2.Labels[ktZone] {
			t.Errorf("want different zones")
		}
	})
	t.Run("should not violate pod anti-affinity on zone (inverse w/existing nodes) (:2533)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		zp := zonePods(c, b.PodAntiAffinity(ktAff(ktZone, s2)))
		c.provision(zp...)
		c.scheduled(zp...)
		aff := c.pod(ktLabelsOpt(s2))
		c.provision(aff)
		c.notScheduled(aff)
	})
	t.Run("should violate preferred pod anti-affinity on zone (inverse w/existing nodes) (:2583)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		zp := zonePods(c, ktPreferPodAffinity(ktAff(ktZone, s2), true))
		c.provision(zp...)
		c.scheduled(zp...)
		aff := c.pod(ktLabelsOpt(s2))
		c.provision(aff)
		c.scheduled(aff)
	})
	t.Run("should allow violation of a pod affinity preference with a conflicting required constraint (:2633)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		a1 := c.pod(ktLabelsOpt(s2))
		pods := append(c.pods(3, ktL, ktDNS(ktHost, 1), ktPreferPodAffinity(ktAff(ktHost, s2), false)), a1)
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("", ktHost, ktLabels, 1, 1, 1)
	})
	t.Run("should support pod anti-affinity with a zone topology (:2668)", func(t *testing.T) {
		// Karpenter needs a round per zone; berth may place all three at
		// once. Both end with one pod per zone and nothing more.
		c := ktNew(t, ktDefault())
		for range 4 {
			c.provision(c.pods(3, ktLabelsOpt(s2), b.PodAntiAffinity(ktAff(ktZone, s2)))...)
		}
		c.expectSkewSel("default", ktZone, s2, 1, 1, 1)
	})
	t.Run("should not schedule pods with affinity to a non-existent pod (:2713)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(10, b.PodAffinity(ktAff(ktZone, s2)))
		c.provision(pods...)
		c.notScheduled(pods...)
	})
	t.Run("should support pod affinity with zone topology (unconstrained target) (:2730)", func(t *testing.T) {
		// Karpenter: target first, the others a round later; berth may
		// place all at once.
		c := ktNew(t, ktDefault())
		target := c.pod(ktLabelsOpt(s2))
		aff := c.pods(10, b.PodAffinity(ktAff(ktZone, s2)))
		c.provision(append(aff, target)...)
		c.scheduled(target)
		var left []*corev1.Pod
		for _, p := range aff {
			if !c.lastOK[p.Name] {
				left = append(left, p)
			}
		}
		if len(left) > 0 {
			c.provision(left...)
			c.scheduled(left...)
		}
		c.expectSkewSel("default", ktZone, nil, 11)
	})
	t.Run("should support pod affinity with zone topology (constrained target) (:2763)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		target := c.pod(ktLabelsOpt(s2), ktReq(in(ktZone, ktZ1)))
		pods := append(c.pods(10, b.PodAffinity(ktAff(ktZone, s2))), target)
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, nil, 11)
	})
	t.Run("should handle multiple dependent affinities (:2792)", func(t *testing.T) {
		db := map[string]string{"type": "db", "spread": "spread"}
		web := map[string]string{"type": "web", "spread": "spread"}
		cache := map[string]string{"type": "cache", "spread": "spread"}
		ui := map[string]string{"type": "ui", "spread": "spread"}
		for i := range 6 {
			c := ktNew(t, ktDefault())
			pods := []*corev1.Pod{
				c.pod(ktLabelsOpt(db)),
				c.pod(ktLabelsOpt(web), b.PodAffinity(ktAff(ktHost, db))),
				c.pod(ktLabelsOpt(cache), b.PodAffinity(ktAff(ktHost, web))),
				c.pod(ktLabelsOpt(ui), b.PodAffinity(ktAff(ktHost, cache))),
			}
			// rotate the order the pods are given in
			pods = append(pods[i%4:], pods[:i%4]...)
			if i >= 4 {
				slices.Reverse(pods)
			}
			c.provision(pods...)
			c.scheduled(pods...)
		}
	})
	t.Run("should fail to schedule pods with unsatisfiable dependencies (:2827)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		p := c.pod(ktLabelsOpt(map[string]string{"type": "db"}), b.PodAffinity(ktAff(ktHost, map[string]string{"type": "web"})))
		c.provision(p)
		c.notScheduled(p)
	})
	nsCase := func(name, ns string, mod func(*corev1.PodAffinityTerm), same bool) {
		t.Run(name, func(t *testing.T) {
			c := ktNew(t, ktDefault())
			c.extra.Namespaces = []*corev1.Namespace{
				{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
				{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"foo": "bar"}}},
			}
			a1 := c.pod(ktLabelsOpt(s2), b.Namespace(ns))
			a2 := c.pod(b.PodAffinity(ktAff(ktHost, s2, mod)))
			c.provision(append(c.pods(10, ktL, ktDNS(ktHost, 1)), a1, a2)...)
			c.scheduled(a1)
			if !same {
				c.notScheduled(a2)
				return
			}
			c.scheduled(a2)
			if n1, n2 := c.nodeOf(a1), c.nodeOf(a2); n1 == nil || n2 == nil || n1.Name != n2.Name {
				t.Errorf("want the same node; plan %v", summary(c.last))
			}
		})
	}
	nsCase("should filter pod affinity topologies by namespace, no matching pods (:2843)", "other-ns-no-match", func(*corev1.PodAffinityTerm) {}, false)
	nsCase("should filter pod affinity topologies by namespace, matching pods namespace list (:2881)", "other-ns-list",
		func(t *corev1.PodAffinityTerm) { t.Namespaces = []string{"other-ns-list"} }, true)
	nsCase("should filter pod affinity topologies by namespace, empty namespace selector (:2920)", "empty-ns-selector",
		func(t *corev1.PodAffinityTerm) {
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{}}
		}, true)
}

func TestKarpenterTopologyWithVolumes(t *testing.T) {
	t.Run("should schedule pod with PVC and TSC minDomains=3 when pods are spread across 3 zones (:3359)", func(t *testing.T) {
		app := map[string]string{"app": "test"}
		c := ktNew(t, ktGroup("default", ktCTs("on-demand")))
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "test-pv"}, Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:    &corev1.ObjectReference{Namespace: "default", Name: "test-pvc"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				b.Term(b.Expr(ktZone, corev1.NodeSelectorOpIn, ktZ1))}}},
		}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "test-pvc", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "test-pv"},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
		c.extra.Volumes, c.extra.Claims = []*corev1.PersistentVolume{pv}, []*corev1.PersistentVolumeClaim{pvc}
		tsc := ktTSC(ktZone, 1, corev1.DoNotSchedule, app, ktMinDomains(3))
		initial := c.pods(3, ktLabelsOpt(app), tsc)
		c.provision(initial...)
		c.scheduled(initial...)
		c.expectSkewSel("default", ktZone, app, 1, 1, 1)
		p := c.pod(ktLabelsOpt(app), tsc, func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "test-pvc"}}})
		})
		c.provision(p)
		c.scheduled(p)
		if n := c.nodeOf(p); n == nil || n.Labels[ktZone] != ktZ1 {
			t.Errorf("want zone-1; plan %v", summary(c.last))
		}
		c.expectSkewSel("default", ktZone, app, 1, 1, 2)
	})
}

// ---------------------------------------------------------------------------
// Beyond Karpenter's cases: the same harness on the combinations the suite
// touches only in part (spread with anti-affinity, existing pods and nodes,
// other namespaces, policies on existing nodes). Expectations are what
// kube-scheduler does once the planned nodes exist.

func TestKarpenterTopologyVariants(t *testing.T) {
	in := func(key string, v ...string) corev1.NodeSelectorRequirement {
		return b.Expr(key, corev1.NodeSelectorOpIn, v...)
	}
	existing := func(c *ktCluster, name, zone, ct string, opts ...b.NodeOption) *corev1.Node {
		n := groupNode(name, c.groups[0], "default-instance-type", zone, v1alpha1.CapacityType(ct))
		for _, o := range opts {
			o(n)
		}
		c.nodes = append(c.nodes, n)
		return n
	}
	t.Run("zonal spread + hostname self anti-affinity", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(6, ktL, ktDNS(ktZone, 1), b.PodAntiAffinity(ktAff(ktHost, ktLabels)))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2, 2)
		c.expectSkew(ktHost, 1, 1, 1, 1, 1, 1)
	})
	t.Run("zonal spread + zonal self anti-affinity", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		c.provision(c.pods(4, ktL, ktDNS(ktZone, 1), b.PodAntiAffinity(ktAff(ktZone, ktLabels)))...)
		c.expectSkew(ktZone, 1, 1, 1)
	})
	t.Run("zonal spread with Ready nodes with room in one zone", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "ready-1", ktZ1, "on-demand")
		existing(c, "ready-2", ktZ1, "on-demand")
		pods := c.pods(6, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2, 2)
	})
	t.Run("matching pods of another namespace do not count", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "full", ktZ1, "on-demand", b.NodeAllocatable(corev1.ResourcePods, "3"))
		for range 3 {
			c.bound = append(c.bound, boundTo(c.pod(ktL, b.Namespace("other")), "full"))
		}
		pods := c.pods(3, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 1, 1, 1)
	})
	t.Run("existing matching pods of the namespace count", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "full", ktZ1, "on-demand", b.NodeAllocatable(corev1.ResourcePods, "3"))
		for range 3 {
			c.bound = append(c.bound, boundTo(c.pod(ktL), "full"))
		}
		pods := c.pods(3, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 1, 2, 3)
	})
	t.Run("hostname spread with Ready nodes holding one pod each", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "a", ktZ1, "on-demand")
		existing(c, "b", ktZ2, "on-demand")
		c.bound = append(c.bound, boundTo(c.pod(ktL), "a"), boundTo(c.pod(ktL), "b"))
		pods := c.pods(4, ktL, ktDNS(ktHost, 1))
		c.provision(pods...)
		c.scheduled(pods...)
	})
	t.Run("hostname spread minDomains 3", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(3, ktL, ktDNS(ktHost, 1, ktMinDomains(3)))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktHost, 1, 1, 1)
	})
	t.Run("zonal spread matchLabelKeys ignores the old revision", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "full", ktZ1, "on-demand", b.NodeAllocatable(corev1.ResourcePods, "3"))
		for range 3 {
			c.bound = append(c.bound, boundTo(c.pod(ktL, ktLabelsOpt(map[string]string{"hash": "a"})), "full"))
		}
		mlk := func(tc *corev1.TopologySpreadConstraint) { tc.MatchLabelKeys = []string{"hash"} }
		pods := c.pods(3, ktL, ktLabelsOpt(map[string]string{"hash": "b"}), ktDNS(ktZone, 1, mlk))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, map[string]string{"hash": "b"}, 1, 1, 1)
	})
	t.Run("zonal affinity to a pod on a full Ready node", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "full", ktZ2, "on-demand", b.NodeAllocatable(corev1.ResourcePods, "1"))
		c.bound = append(c.bound, boundTo(c.pod(ktLabelsOpt(s2)), "full"))
		pods := c.pods(5, b.PodAffinity(ktAff(ktZone, s2)))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, nil, 6)
	})
	t.Run("hostname self anti-affinity beyond the group's max size", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.Size(0, 5)))
		c.provision(c.pods(7, ktL, b.PodAntiAffinity(ktAff(ktHost, ktLabels)))...)
		if len(c.lastOK) != 5 {
			t.Errorf("want 5 placed; plan %v", summary(c.last))
		}
	})
	t.Run("zonal spread of spot pods (no spot in zone-3)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(4, ktL, ktDNS(ktZone, 1), b.NodeSelector(ktCT, "spot"))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("capacity-type spread of zone-3 pods (on-demand only there)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(4, ktL, ktDNS(ktCT, 1), b.NodeSelector(ktZone, ktZ3))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktCT, 4)
	})
	t.Run("zonal spread counts a tainted node's pods (nodeTaintsPolicy Ignore)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "tainted", ktZ1, "on-demand", b.NodeTaint("dedicated", "x", corev1.TaintEffectNoSchedule))
		c.bound = append(c.bound, boundTo(c.pod(ktL), "tainted"), boundTo(c.pod(ktL), "tainted"))
		pods := c.pods(4, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2, 2)
	})
	t.Run("zonal spread where another namespace's anti-affinity closes zone-1", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "guard", ktZ1, "on-demand")
		c.bound = append(c.bound, boundTo(c.pod(b.Namespace("other"), b.PodAntiAffinity(ktAff(ktZone, ktLabels, func(t *corev1.PodAffinityTerm) { t.Namespaces = []string{"default"} }))), "guard"))
		c.provision(c.pods(3, ktL, ktDNS(ktZone, 1))...)
		// zone-1 is a domain with 0 pods no pod may enter: two pods go
		// to zones 2 and 3, the third waits.
		c.expectSkew(ktZone, 1, 1)
	})
	t.Run("two deployments: zonal spreads, B anti-affine to A by hostname", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		a := map[string]string{"app": "a"}
		bl := map[string]string{"app": "b"}
		pods := append(c.pods(3, ktLabelsOpt(a), ktTSC(ktZone, 1, corev1.DoNotSchedule, a)),
			c.pods(3, ktLabelsOpt(bl), ktTSC(ktZone, 1, corev1.DoNotSchedule, bl), b.PodAntiAffinity(ktAff(ktHost, a)))...)
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, a, 1, 1, 1)
		c.expectSkewSel("default", ktZone, bl, 1, 1, 1)
	})
	t.Run("self-affinity by zone joins an existing member on a full node", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "full", ktZ2, "on-demand", b.NodeAllocatable(corev1.ResourcePods, "1"))
		c.bound = append(c.bound, boundTo(c.pod(ktLabelsOpt(s2), b.PodAffinity(ktAff(ktZone, s2))), "full"))
		pods := c.pods(4, ktLabelsOpt(s2), b.PodAffinity(ktAff(ktZone, s2)))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, s2, 5)
	})
	t.Run("zonal spread with a required zone subset and existing pods outside it", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "z3", ktZ3, "on-demand", b.NodeAllocatable(corev1.ResourcePods, "2"))
		c.bound = append(c.bound, boundTo(c.pod(ktL), "z3"), boundTo(c.pod(ktL), "z3"))
		pods := c.pods(4, ktL, ktDNS(ktZone, 1), ktReq(in(ktZone, ktZ1, ktZ2)))
		c.provision(pods...)
		c.scheduled(pods...)
		// zone-3 is not a domain for these pods (nodeAffinityPolicy Honor).
		c.expectSkew(ktZone, 2, 2, 2)
	})
}

func TestKarpenterTopologyVariantsLaunchability(t *testing.T) {
	existing := func(c *ktCluster, name, zone, ct string, opts ...b.NodeOption) *corev1.Node {
		n := groupNode(name, c.groups[0], "default-instance-type", zone, v1alpha1.CapacityType(ct))
		b.LaunchedBy(c.groups[0])(n)
		for _, o := range opts {
			o(n)
		}
		c.nodes = append(c.nodes, n)
		return n
	}
	t.Run("instance-type spread", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := c.pods(4, ktL, ktDNS(v1alpha1.LabelInstanceType, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(v1alpha1.LabelInstanceType, 1, 1, 1, 1)
	})
	t.Run("zonal spread with zone-3's offerings unavailable", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		for _, it := range []string{"default-instance-type", "small-instance-type", "arm-instance-type", "single-pod-instance-type"} {
			c.extra.Unavailable = append(c.extra.Unavailable, scaleup.Offering{NodeGroup: "default", InstanceType: it, Zone: ktZ3, CapacityType: "on-demand"})
		}
		pods := c.pods(4, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("zonal spread with the group at its max size", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.Size(0, 2)))
		existing(c, "a", ktZ1, "on-demand")
		existing(c, "b", ktZ2, "on-demand")
		pods := c.pods(4, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("zonal spread with the group at its cpu limit", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", nil, b.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")})))
		existing(c, "a", ktZ1, "on-demand")
		existing(c, "b", ktZ2, "on-demand")
		pods := c.pods(4, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("zonal spread: zone-3 only in a group of a taint the pods do not tolerate", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2)), ktGroup("gpu", ktZones(ktZ3), b.TemplateTaint("gpu", "true", corev1.TaintEffectNoSchedule)))
		pods := c.pods(4, ktL, ktDNS(ktZone, 1))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("zonal spread: zone-3 group selected by no pending pod's nodeSelector", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2), b.TemplateLabel("pool", "a")), ktGroup("other", ktZones(ktZ3), b.TemplateLabel("pool", "b")))
		pods := c.pods(4, ktL, ktDNS(ktZone, 1), b.NodeSelector("pool", "a"))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("zonal spread, nodeAffinityPolicy Ignore: zone-3 group selected by no pod", func(t *testing.T) {
		ign := corev1.NodeInclusionPolicyIgnore
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2), b.TemplateLabel("pool", "a")), ktGroup("other", ktZones(ktZ3), b.TemplateLabel("pool", "b")))
		pods := c.pods(4, ktL, ktDNS(ktZone, 1, func(tc *corev1.TopologySpreadConstraint) { tc.NodeAffinityPolicy = &ign }), b.NodeSelector("pool", "a"))
		c.provision(pods...)
		// kube-scheduler sees no zone-3 node once these exist: all four fit.
		c.scheduled(pods...)
		c.expectSkew(ktZone, 2, 2)
	})
	t.Run("hostname spread maxSkew 2 with an empty tainted Ready node (nodeTaintsPolicy Ignore)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "tainted", ktZ1, "on-demand", b.NodeTaint("dedicated", "x", corev1.TaintEffectNoSchedule))
		pods := c.pods(4, ktL, ktDNS(ktHost, 2))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktHost, 2, 2)
	})
	t.Run("zonal spread, minDomains 3, only two zones launchable but a Ready node in zone-3", func(t *testing.T) {
		c := ktNew(t, ktGroup("default", ktZones(ktZ1, ktZ2)))
		n := groupNode("z3", ktDefault(), "default-instance-type", ktZ3, "on-demand")
		b.NodeAllocatable(corev1.ResourcePods, "0")(n)
		c.nodes = append(c.nodes, n)
		pods := c.pods(4, ktL, ktDNS(ktZone, 1, ktMinDomains(3)))
		c.provision(pods...)
		// Three domains exist (zone-3's full node): min is zone-3's 0, so
		// zones 1 and 2 take one pod each.
		c.expectSkew(ktZone, 1, 1)
	})
}

// TestKarpenterTopologyOnBootingNodes runs the suite again with every
// node a round launched still booting in the next rounds.
func TestKarpenterTopologyOnBootingNodes(t *testing.T) {
	ktBooting = true
	defer func() { ktBooting = false }()
	for name, f := range map[string]func(*testing.T){
		"General": TestKarpenterTopologyGeneral, "Zonal": TestKarpenterTopologyZonal, "Hostname": TestKarpenterTopologyHostname,
		"CapacityType": TestKarpenterTopologyCapacityType, "Combined": TestKarpenterTopologyCombined, "MatchLabelKeys": TestKarpenterTopologyMatchLabelKeys,
		"InclusionPolicies": TestKarpenterTopologyInclusionPolicies, "NodeAffinity": TestKarpenterTopologyNodeAffinity,
		"PodAffinity": TestKarpenterTopologyPodAffinity, "WithVolumes": TestKarpenterTopologyWithVolumes,
	} {
		t.Run(name, f)
	}
}

func TestKarpenterTopologyVariantsAffinity(t *testing.T) {
	existing := func(c *ktCluster, name, zone string, pods string) *corev1.Node {
		n := groupNode(name, c.groups[0], "default-instance-type", zone, "on-demand")
		b.LaunchedBy(c.groups[0])(n)
		b.NodeAllocatable(corev1.ResourcePods, pods)(n)
		c.nodes = append(c.nodes, n)
		return n
	}
	t.Run("hostname spread maxSkew 2 with a full Ready node of 0 pods", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "full", ktZ1, "0")
		pods := c.pods(4, ktL, ktDNS(ktHost, 2))
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkew(ktHost, 2, 2)
	})
	t.Run("self-affinity by hostname joins the existing member's node until it is full", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "home", ktZ1, "3")
		c.bound = append(c.bound, boundTo(c.pod(ktLabelsOpt(s2), b.PodAffinity(ktAff(ktHost, s2))), "home"))
		pods := c.pods(5, ktLabelsOpt(s2), b.PodAffinity(ktAff(ktHost, s2)))
		c.provision(pods...)
		if len(c.lastOK) != 2 || c.newNodes() != 0 {
			t.Errorf("want 2 on home, 3 pending, no node; plan %v", summary(c.last))
		}
	})
	t.Run("anti-affinity by hostname to pods of all namespaces (empty namespaceSelector)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "a", ktZ1, "10")
		c.bound = append(c.bound, boundTo(c.pod(ktLabelsOpt(s2), b.Namespace("other")), "a"))
		all := func(t *corev1.PodAffinityTerm) { t.NamespaceSelector = &metav1.LabelSelector{} }
		pods := c.pods(3, b.PodAntiAffinity(ktAff(ktHost, s2, all)))
		c.extra.Namespaces = []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, {ObjectMeta: metav1.ObjectMeta{Name: "other"}}}
		c.provision(pods...)
		c.scheduled(pods...)
		if c.newNodes() != 1 {
			t.Errorf("want one new node (not a); plan %v", summary(c.last))
		}
	})
	t.Run("pending pods anti-affine by zone to other pending pods", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		bl := map[string]string{"app": "b"}
		pods := append(c.pods(2, ktLabelsOpt(map[string]string{"app": "a"}), b.PodAntiAffinity(ktAff(ktZone, bl))), c.pods(3, ktLabelsOpt(bl))...)
		c.provision(pods...)
		c.scheduled(pods...)
	})
	t.Run("zonal spread with half the pods pinned to zone-1", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := append(c.pods(3, ktL, ktDNS(ktZone, 1), b.NodeSelector(ktZone, ktZ1)), c.pods(3, ktL, ktDNS(ktZone, 1))...)
		c.provision(pods...)
		c.scheduled(pods...)
	})
	t.Run("capacity-type spread with half the pods pinned to zone-3 (on-demand)", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		pods := append(c.pods(3, ktL, ktDNS(ktCT, 1), b.NodeSelector(ktZone, ktZ3)), c.pods(3, ktL, ktDNS(ktCT, 1))...)
		c.provision(pods...)
		c.scheduled(pods...)
	})
	t.Run("zonal self anti-affinity and zonal spread, existing member in zone-2", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		existing(c, "z2", ktZ2, "10")
		c.bound = append(c.bound, boundTo(c.pod(ktL, ktDNS(ktZone, 1), b.PodAntiAffinity(ktAff(ktZone, ktLabels))), "z2"))
		c.provision(c.pods(3, ktL, ktDNS(ktZone, 1), b.PodAntiAffinity(ktAff(ktZone, ktLabels)))...)
		c.expectSkew(ktZone, 1, 1, 1)
	})
	t.Run("web follows db by hostname, db spread by zone", func(t *testing.T) {
		c := ktNew(t, ktDefault())
		db := map[string]string{"app": "db"}
		pods := append(c.pods(3, ktLabelsOpt(db), ktTSC(ktZone, 1, corev1.DoNotSchedule, db), b.PodAntiAffinity(ktAff(ktHost, db))),
			c.pods(3, ktLabelsOpt(map[string]string{"app": "web"}), b.PodAffinity(ktAff(ktHost, db)))...)
		c.provision(pods...)
		c.scheduled(pods...)
		c.expectSkewSel("default", ktZone, db, 1, 1, 1)
	})
}
