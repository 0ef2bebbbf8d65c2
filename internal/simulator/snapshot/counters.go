package snapshot

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

type counterKind int

const (
	// kindSpread counts, for one topology spread constraint of a class, the
	// pods it selects per domain over the nodes the constraint includes.
	kindSpread counterKind = iota
	// kindAffinity counts, for a class with required pod affinity, the pods
	// matching all its terms per (term key, value).
	kindAffinity
	// kindAnti counts, for one required anti-affinity term of a class, the
	// pods it matches per value of its key.
	kindAnti
	// kindExistingAnti counts, for one anti-affinity term carried by the
	// pods of a class, those pods per value of the term's key: incoming
	// pods the term matches may not join those domains.
	kindExistingAnti
	// kindSoftSpread counts, for one ScheduleAnyway spread constraint of a
	// class, the pods it selects per domain over the nodes with its key:
	// what kube-scheduler's score prefers few of.
	kindSoftSpread
)

// topologyPair is a topology key and one of its values.
type topologyPair struct{ key, value string }

// Counter counts pods per topology domain, incrementally: AddPod and
// RemovePod update every counter the pod's class is counted in.
type Counter struct {
	ID    int
	kind  counterKind
	owner *Class
	// term is the index of the owner's constraint or term.
	term int
	// key is the topology key (all kinds but kindAffinity, which uses the
	// key of each term).
	key string
	// signature says what the counter counts; classes with equal
	// constraints share one counter. (ID is its index.)
	signature string

	// pairs holds the counts; positive tracks how many are above zero.
	pairs    map[topologyPair]int
	positive int

	// Spread only: eligible nodes per domain value, a histogram of domain
	// counts to keep the minimum in O(1), and potential domains from node
	// group templates that have no eligible node yet.
	domainNodes   map[string]int
	hist          []int
	min           int
	potential     map[string]int
	potentialOnly int

	// byShape caches eligibility per existing node shape (Node.Shape):
	// nodes of a shape have the same labels but the hostname's value and
	// the same taints, all eligibility reads unless the owner's node
	// selection names nodes.
	byShape []tristate
}

// matches reports whether pods of class c are counted.
func (k *Counter) matches(s *Snapshot, c *Class) bool {
	if k.ID < len(c.matchCache) && c.matchCache[k.ID] != unknown {
		return c.matchCache[k.ID] == yes
	}
	var ok bool
	o := k.owner
	switch k.kind {
	case kindSpread, kindSoftSpread:
		sel := o.Spread
		if k.kind == kindSoftSpread {
			sel = o.SoftSpread
		}
		// kube-scheduler counts nothing for an empty selector.
		ok = c.Namespace == o.Namespace && !c.Terminating && !sel[k.term].Selector.Empty() && sel[k.term].Selector.Matches(c.Labels)
	case kindAffinity:
		ok = len(o.Affinity) > 0
		nsLabels := s.namespaces[c.Namespace]
		for i := range o.Affinity {
			ok = ok && o.Affinity[i].Matches(c.Namespace, nsLabels, c.Labels)
		}
	case kindAnti:
		ok = o.AntiAffinity[k.term].Matches(c.Namespace, s.namespaces[c.Namespace], c.Labels)
	case kindExistingAnti:
		// Pods of any class carrying the same term are counted.
		for i := range c.AntiAffinity {
			ok = ok || c.AntiAffinity[i].signature == o.AntiAffinity[k.term].signature
		}
	}
	for len(c.matchCache) <= k.ID {
		c.matchCache = append(c.matchCache, unknown)
	}
	c.matchCache[k.ID] = of(ok)
	return ok
}

// eligible reports whether pods on node n are counted.
func (k *Counter) eligible(n *Node) bool {
	if v := n.eligCache(k.ID); v != unknown {
		return v == yes
	}
	var ok bool
	switch v := k.shapeEligible(n); v {
	case unknown:
		ok = k.computeEligible(n)
		if n.Shape > 0 && (k.kind != kindSpread || !k.owner.NamesNodes) {
			for len(k.byShape) <= int(n.Shape) {
				k.byShape = append(k.byShape, unknown)
			}
			k.byShape[n.Shape] = of(ok)
		}
	default:
		ok = v == yes
	}
	n.setEligCache(k.ID, of(ok))
	return ok
}

// shapeEligible is the eligibility known for n's shape.
func (k *Counter) shapeEligible(n *Node) tristate {
	if int(n.Shape) < len(k.byShape) && n.Shape > 0 {
		return k.byShape[n.Shape]
	}
	return unknown
}

func (k *Counter) computeEligible(n *Node) bool {
	labels := n.Labels()
	if k.kind != kindSpread {
		if k.kind == kindAffinity {
			return true // each term's key is checked when counting
		}
		_, ok := labels[k.key]
		return ok
	}
	o := k.owner
	for _, c := range o.Spread {
		if _, ok := labels[c.TopologyKey]; !ok {
			return false
		}
	}
	c := o.Spread[k.term]
	if c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor && !matchesSomeOption(o, n) {
		return false
	}
	if c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		if _, untolerated := UntoleratedTaint(n.Taints, o.Tolerations); untolerated {
			return false
		}
	}
	return true
}

// matchesSomeOption reports whether the node selection of class c
// matches node n, or, for a planned node or template whose options are
// still open, one of the nodes it may become: such a node is counted as
// eligible (a pod of c placed there narrows it to matching options), so
// that the pods on it count in its domain as kube-scheduler will count
// them once it is launched. When it becomes a node c does not match, the
// count is one kube-scheduler will not make: the plan is stricter, never
// looser.
func matchesSomeOption(c *Class, n *Node) bool {
	if ok, _ := c.NodeAffinity.Match(n.Node); ok {
		return true
	}
	if n.Flex == nil {
		return false
	}
	for _, o := range n.Flex.Options {
		if ok, _ := c.NodeAffinity.Match(o.Node); ok {
			return true
		}
	}
	return false
}

// TolerationComparisonOperators mirrors kube-scheduler's
// TaintTolerationComparisonOperators feature gate (alpha, off by default in
// Kubernetes 1.36): tolerations with Gt/Lt operators do not tolerate.
const TolerationComparisonOperators = false

// UntoleratedTaint returns the first NoSchedule or NoExecute taint the
// tolerations do not tolerate, with kube-scheduler's semantics.
func UntoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	return v1helper.FindMatchingUntoleratedTaint(klog.Background(), taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, TolerationComparisonOperators)
}

// count adds delta pods on node n.
func (k *Counter) count(n *Node, delta int) {
	labels := n.Labels()
	if k.kind == kindAffinity {
		for i := range k.owner.Affinity {
			if v, ok := labels[k.owner.Affinity[i].TopologyKey]; ok {
				k.bump(topologyPair{k.owner.Affinity[i].TopologyKey, v}, delta)
			}
		}
		return
	}
	v, ok := labels[k.key]
	if !ok {
		return
	}
	before := k.pairs[topologyPair{k.key, v}]
	k.bump(topologyPair{k.key, v}, delta)
	if k.kind == kindSpread {
		k.histMove(before, before+delta)
	}
}

func (k *Counter) bump(p topologyPair, delta int) {
	before := k.pairs[p]
	after := before + delta
	if after == 0 {
		delete(k.pairs, p)
	} else {
		k.pairs[p] = after
	}
	switch {
	case before <= 0 && after > 0:
		k.positive++
	case before > 0 && after <= 0:
		k.positive--
	}
}

// Count returns the number of counted pods in a domain.
func (k *Counter) Count(key, value string) int { return k.pairs[topologyPair{key, value}] }

// Positive is the number of domains with at least one counted pod.
func (k *Counter) Positive() int { return k.positive }

// histMove moves one domain from count a to count b in the histogram.
func (k *Counter) histMove(a, b int) {
	for len(k.hist) <= max(a, b) {
		k.hist = append(k.hist, 0)
	}
	k.hist[a]--
	k.hist[b]++
	switch {
	case b < k.min:
		k.min = b
	case a == k.min && k.hist[a] == 0:
		for k.min < len(k.hist) && k.hist[k.min] == 0 {
			k.min++
		}
	}
}

// addDomain registers an eligible node in a domain.
func (k *Counter) addDomain(v string) { k.addDomains(v, 1) }

// addDomains registers nodes eligible nodes in a domain.
func (k *Counter) addDomains(v string, nodes int) {
	was := k.domainNodes[v]
	k.domainNodes[v] = was + nodes
	if was > 0 {
		return
	}
	if len(k.hist) == 0 {
		k.hist = append(k.hist, 0)
	}
	c := k.pairs[topologyPair{k.key, v}]
	for len(k.hist) <= c {
		k.hist = append(k.hist, 0)
	}
	k.hist[c]++
	if len(k.domainNodes) == 1 || c < k.min {
		k.min = c
	}
	if k.potential[v] > 0 {
		k.potentialOnly--
	}
}

// removeDomain reverses addDomain.
func (k *Counter) removeDomain(v string) {
	k.domainNodes[v]--
	if k.domainNodes[v] > 0 {
		return
	}
	delete(k.domainNodes, v)
	c := k.pairs[topologyPair{k.key, v}]
	k.hist[c]--
	if c == k.min && k.hist[c] == 0 {
		for k.min < len(k.hist) && k.hist[k.min] == 0 {
			k.min++
		}
	}
	if k.potential[v] > 0 {
		k.potentialOnly++
	}
}

// addPotential adds delta templates to a potential domain.
func (k *Counter) addPotential(v string, delta int) {
	before := k.potential[v]
	k.potential[v] = before + delta
	if k.domainNodes[v] > 0 {
		return
	}
	switch {
	case before == 0 && delta > 0:
		k.potentialOnly++
	case before > 0 && before+delta == 0:
		k.potentialOnly--
	}
}

// Templates are potential domains of every key, the hostname too: a node
// group that can launch one more eligible node offers a fresh hostname
// with no pods, as Karpenter counts it (and as Cluster Autoscaler's
// estimator does by adding each new node to its snapshot). Without it, a
// hostname spread from zero would put every replica on the first planned
// node: faithful to kube-scheduler's arithmetic over the nodes that exist,
// not to what the constraint asks for. A hostname spread whose minimum is
// pinned at zero this way lets at most maxSkew matching pods share a
// node, and once the planned nodes exist kube-scheduler accepts each on
// its node (its minimum is at least zero).

// A template is a potential domain of a spread only if a node may be
// launched from it: the constraint's pods could be placed on its nodes
// (they tolerate its taints and their node selection matches one of its
// options), or another pending pod of the round could (Wanted), whatever
// the constraint's inclusion policies. kube-scheduler counts only the
// domains of nodes that exist, so a zone only a tainted group offers is
// none of its domains until such a node exists; counted while no pod
// could ever get a node there, it would hold every other zone at its
// minimum of zero and the pods would wait for a node never launched. A
// template another pod may get a node from counts: once that node
// exists, kube-scheduler counts its domain.
func (k *Counter) potentialFrom(s *Snapshot, t *Node) bool {
	if k.kind != kindSpread || !k.eligible(t) {
		return false
	}
	if t.Wanted {
		return true
	}
	if _, untolerated := UntoleratedTaint(t.Taints, k.owner.Tolerations); untolerated {
		return false
	}
	return s.LaunchableForClass(k.owner, t)
}

// LaunchableForClass reports whether template t may launch a node for a
// pod of class c: one of its options matches c's node selection and holds
// one such pod on its own (its requests, extended resources included,
// with the option's DaemonSet overhead, and a pod slot) and, for a class
// with device claims, gives it its devices (OptionHasDevices). A zone
// whose options are all too small for the pod (or lack its devices) is
// launched for none of its pods: counted as a domain to come, it would
// hold the spread's minimum at zero, and the pods at the zones with nodes
// would wait for a node never launched. It depends on t and c alone (not
// on the limits), so that enabling and disabling a template add and take
// off the same domains: the answer for a class with claims (which the
// plan's allocations could change) is kept for the round's templates.
func (s *Snapshot) LaunchableForClass(c *Class, t *Node) bool {
	if len(c.Claims) == 0 {
		return LaunchableFor(c.NodeAffinity, c.RequestsOn(t), c.PodsOn(t), t)
	}
	k := launchKey{class: c.ID, template: t}
	if v, ok := s.launchable[k]; ok {
		return v
	}
	v := launchable(c.NodeAffinity, c.RequestsOn(t), c.PodsOn(t), t, func(o *Option) bool { return s.OptionHasDevices(t, o, c) })
	if s.launchable == nil {
		s.launchable = map[launchKey]bool{}
	}
	s.launchable[k] = v
	return v
}

// launchKey keys LaunchableForClass's answers for classes with claims.
type launchKey struct {
	class    int
	template *Node
}

// LaunchableFor reports whether template t may launch a node for a pod
// of node selection aff that needs req and pods pod slots on it: t
// matches aff (or one of its options does) and one such option holds
// the pod on its own, with its DaemonSet overhead. A template without
// options is judged by its selection alone.
func LaunchableFor(aff nodeaffinity.RequiredNodeAffinity, req *Resources, pods int, t *Node) bool {
	return launchable(aff, req, pods, t, nil)
}

// launchable is LaunchableFor where the option must also pass devices
// (nil: no check).
func launchable(aff nodeaffinity.RequiredNodeAffinity, req *Resources, pods int, t *Node, devices func(*Option) bool) bool {
	whole, _ := aff.Match(t.Node)
	if t.Flex == nil {
		return whole
	}
	for _, o := range t.Flex.Options {
		if !t.FitsOption(o, req, pods) {
			continue
		}
		if ok, _ := aff.Match(o.Node); (whole || ok) && (devices == nil || devices(o)) {
			return true
		}
	}
	return false
}

// resetPotential counts anew the potential domains of the templates that
// can still launch a node.
func (k *Counter) resetPotential(s *Snapshot) {
	k.potential = map[string]int{}
	k.potentialOnly = 0
	for _, t := range s.templates {
		if s.templateOff[t] || !k.potentialFrom(s, t) {
			continue
		}
		k.addPotential(t.Labels()[k.key], 1)
	}
}

// MinMatch is the smallest count over the constraint's domains, with
// kube-scheduler's rules: 0 when there are fewer domains than minDomains,
// MaxInt32 when there are none. A potential domain (a zone a node group
// could launch into) counts as a domain with zero pods.
func (k *Counter) MinMatch(minDomains int32) int {
	domains := len(k.domainNodes) + k.potentialOnly
	switch {
	case domains < int(minDomains):
		return 0
	case k.potentialOnly > 0:
		return 0
	case len(k.domainNodes) == 0:
		return math.MaxInt32
	}
	return k.min
}

// PinnedByPotential reports whether a potential domain (a template that
// can launch one more eligible node) holds the minimum at zero: then a
// domain found too full stays too full while pods are only added.
func (k *Counter) PinnedByPotential() bool { return k.potentialOnly > 0 }

// Domains is the number of domains, potential ones included.
func (k *Counter) Domains() int { return len(k.domainNodes) + k.potentialOnly }
