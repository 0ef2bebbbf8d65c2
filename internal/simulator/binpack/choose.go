package binpack

import (
	"cmp"
	"math"
	"slices"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// chooseTemplate picks the template to open a new node from for a pod of
// class c: among templates that fit the pod, the highest weight, then the
// lowest cost of the share of a node the pod would use, then the pod's
// preferences (preferredTemplate). It returns the template's launchable
// options that fit the pod.
func (p *packer) chooseTemplate(c *snapshot.Class) (*Template, []*snapshot.Option) {
	return p.chooseTemplateExcept(c, nil)
}

// chooseTemplateExcept is chooseTemplate among the templates not in skip.
func (p *packer) chooseTemplateExcept(c *snapshot.Class, skip map[*Template]bool) (*Template, []*snapshot.Option) {
	var (
		ties     []*Template
		tiedOpts [][]*snapshot.Option
		bestCost = math.Inf(1)
	)
	for _, t := range p.in.Templates {
		if skip[t] || !p.s.TemplateAvailable(t.Node) || (len(ties) > 0 && t.Weight < ties[0].Weight) {
			continue
		}
		opts, cost, st := p.fitCost(c, t)
		if st.Failed() {
			continue
		}
		switch {
		case len(ties) == 0 || t.Weight > ties[0].Weight || cost < bestCost-minSaving:
			ties, tiedOpts, bestCost = []*Template{t}, [][]*snapshot.Option{opts}, cost
		case tied(cost, bestCost):
			ties, tiedOpts = append(ties, t), append(tiedOpts, opts)
		}
	}
	if len(ties) == 0 {
		return nil, nil
	}
	i := p.preferredTemplate(c, ties, tiedOpts)
	return ties[i], tiedOpts[i]
}

// fit evaluates a pod of class c against template t: the filters on the
// template's node, then the options that are launchable and fit the pod.
// The slice may be shared: callers never modify it.
func (p *packer) fit(c *snapshot.Class, t *Template) ([]*snapshot.Option, predicates.Status) {
	opts, _, st := p.fitCost(c, t)
	return opts, st
}

// fitCost is fit and the lowest shareCost among the options. What depends
// only on the pod's requests and the launchable options (which fit, and
// their cost) is cached per template and requests while every option of
// the template may launch (no limit near), for pods that do not select on
// option labels and claim no devices: many classes differ only in labels.
func (p *packer) fitCost(c *snapshot.Class, t *Template) ([]*snapshot.Option, float64, predicates.Status) {
	if st := predicates.Run(p.in.Filters, p.s, c, t.Node); st.Failed() {
		return nil, 0, st
	}
	allowed, reason := p.in.Launcher.Allowed(p.s, t)
	if len(allowed) == 0 {
		return nil, 0, predicates.Status{Code: predicates.Unresolvable, Reason: reason}
	}
	key, cacheable := fitKeyOf(c, t), p.sharesFit(c, t, allowed)
	if cacheable {
		if f, ok := p.fits[key]; ok {
			return f.opts, f.cost, f.st
		}
	}
	opts, st := p.fitOptions(c, t, allowed)
	cost := math.Inf(1)
	for _, o := range opts {
		cost = min(cost, p.shareCost(o, c))
	}
	if cacheable {
		p.fits[key] = fitResult{opts: opts, cost: cost, st: st}
	}
	return opts, cost, st
}

// fitKey identifies what fitOptions and shareCost read of a class and a
// template's launchable options; fitResult is their answer.
type fitKey struct {
	t                    *Template
	cpu, memory, storage int64
	addOnPods            int
}

type fitResult struct {
	opts []*snapshot.Option
	cost float64
	st   predicates.Status
	// rate is newNodeRate's answer for the options, once rated.
	rate  float64
	rated bool
}

// fitKeyOf is the key of class c on template t.
func fitKeyOf(c *snapshot.Class, t *Template) fitKey {
	r := &c.Requests
	return fitKey{t: t, cpu: r.MilliCPU, memory: r.Memory, storage: r.EphemeralStorage, addOnPods: c.AddOnPods}
}

// sharesFit reports whether the answer for class c on template t depends
// on its key alone: the class asks for no extended resources or devices
// and selects no option label, and every option of t may launch (allowed
// is the template's own list: no limit is near).
func (p *packer) sharesFit(c *snapshot.Class, t *Template, allowed []*snapshot.Option) bool {
	all := t.Node.Flex.Options
	return sameSlice(allowed, all) && len(c.Requests.Scalar) == 0 && len(c.Claims) == 0 && !p.s.ReferencesOptionKeys(c)
}

// sameSlice reports whether a and b are the same slice (not merely equal).
func sameSlice(a, b []*snapshot.Option) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// fitOptions are the options of allowed that a pod of class c fits, on
// an empty node of template t.
func (p *packer) fitOptions(c *snapshot.Class, t *Template, allowed []*snapshot.Option) ([]*snapshot.Option, predicates.Status) {
	checkLabels := p.s.ReferencesOptionKeys(c)
	out := make([]*snapshot.Option, 0, len(allowed))
	for _, o := range allowed {
		if !t.Node.FitsOption(o, &c.Requests, 1+c.AddOnPods) || !p.s.OptionHasDevices(t.Node, o, c) {
			continue
		}
		if checkLabels && !c.MatchesOption(o.Node) {
			continue
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, predicates.Status{Code: predicates.Unresolvable, Reason: "no launchable instance type fits the pod"}
	}
	return out, predicates.OK
}

// shareCost is the price of the fraction of a node of option o that a pod
// of class c uses: its largest share of any resource, of the devices its
// claims take (snapshot.DeviceUnits), or of the pod slots, for a pod
// without requests.
func (p *packer) shareCost(o *snapshot.Option, c *snapshot.Class) float64 {
	r := &c.Requests
	free, pods := o.Free()
	share := float64(1+c.AddOnPods) / float64(max(pods, 1))
	if du := p.s.DeviceUnits(o, c); du > 0 {
		share = max(share, 1/du)
	}
	ratio := func(req, have int64) {
		if req > 0 && have > 0 {
			share = max(share, float64(req)/float64(have))
		}
	}
	ratio(r.MilliCPU, free.MilliCPU)
	ratio(r.Memory, free.Memory)
	ratio(r.EphemeralStorage, free.EphemeralStorage)
	for k, v := range r.Scalar {
		ratio(v, free.Scalar[k])
	}
	return o.Price * share
}

// sortPods orders pods so that the hard ones go first: higher priority,
// then, in orderDefault, pods with affinity, anti-affinity or spread
// constraints (they open the nodes and zones the others then fill), then
// bigger requests by the order's measure. Pods of one class stay together.
//
// A pod that may go anywhere only because it matches its own required
// pod-affinity terms goes after the pinned pending pods those terms select
// (deferSelfMatching): placed first, it would open a domain that
// kube-scheduler refuses it once one of them is bound elsewhere.
//
// The order depends only on the pods, not on the order they were listed in
// (class IDs do), so that the controller and `berth plan` make the same plan
// for the same cluster: classes are told apart by their first pod's name.
func sortPods(s *snapshot.Snapshot, pods []*snapshot.Pod, order podOrder) {
	slices.SortFunc(pods, func(a, b *snapshot.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	// Pods of one class, and pods that share a companion (one share key;
	// each has a class of its own, its labels name it), are taken one
	// after another, so that they meet on the same nodes: sharing pods
	// interleaved with others would each pay for a companion of their own.
	first := map[*snapshot.Class]int{}
	firstKey := map[string]int{}
	for i, p := range pods {
		if _, ok := first[p.Class]; !ok {
			first[p.Class] = i
		}
		if _, ok := firstKey[p.Class.ShareKey]; !ok && p.Class.ShareKey != "" {
			firstKey[p.Class.ShareKey] = i
		}
	}
	group := func(c *snapshot.Class) int {
		if c.ShareKey != "" {
			return firstKey[c.ShareKey]
		}
		return first[c]
	}
	slices.SortStableFunc(pods, func(a, b *snapshot.Pod) int {
		ca, cb := a.Class, b.Class
		return cmp.Or(
			cmp.Compare(cb.Priority, ca.Priority),
			order.compare(ca, cb),
			cmp.Compare(group(ca), group(cb)),
			cmp.Compare(first[ca], first[cb]),
		)
	})
	deferSelfMatching(s, pods)
}

// deferSelfMatching moves the pods of a class with required pod affinity
// that they match themselves (kube-scheduler lets the first pod of such a
// group go to any domain while no pod matches; a class some placed pod
// matches already, or pinned on a term's key itself, opens no domain of
// its own) to just after the last pod
// of a class anchored on a term's topology key (pinned on it by its node
// affinity or its volumes', or following such a class: anchoredClasses)
// that matches its terms too: once a pod of that class is bound in its own domain, the
// terms hold only there, so the self-matching pod must join it rather
// than open a domain of its own first. Pods of an unpinned matching class
// go where they fit, and are not waited for. O(self-matching affinity
// classes x classes + pods).
func deferSelfMatching(s *snapshot.Snapshot, pods []*snapshot.Pod) {
	self, classes := selfMatching(s, pods)
	if len(self) == 0 {
		return // most rounds: nothing is computed past this
	}
	anchors := anchoredClasses(s, classes)
	// A class moved behind one that is moved itself moves again, for
	// chains up to deferDepth long (classes that select each other would
	// trade places for ever).
	for range deferDepth {
		if !deferOnce(s, pods, self, anchors) {
			return
		}
	}
}

// deferDepth bounds the chains of self-matching classes deferSelfMatching
// follows.
const deferDepth = 8

// selfMatching returns the classes among pods that match their own
// required pod-affinity terms while no placed pod does and that are not
// pinned on a term's key themselves (the classes kube-scheduler's
// exception could let open a domain of their own), and every class of
// pods, each once.
func selfMatching(s *snapshot.Snapshot, pods []*snapshot.Pod) (self, classes []*snapshot.Class) {
	seen := map[*snapshot.Class]bool{}
	for _, p := range pods {
		c := p.Class
		if seen[c] {
			continue
		}
		seen[c] = true
		classes = append(classes, c)
		if len(c.Affinity) > 0 && !matchedAlready(c) && !pinnedOn(c, c.Affinity) &&
			matchesAll(c.Affinity, c.Namespace, s.NamespaceLabels(c.Namespace), c.Labels) {
			self = append(self, c)
		}
	}
	return self, classes
}

// anchored are, per topology key an affinity term names, the classes held
// to some of its domains.
type anchored map[string][]*snapshot.Class

// anchoredClasses are, per topology key an affinity term names, the
// classes held to some of its domains: pinned on it (pinnedOnKey), or with
// a required affinity term on it that an anchored class matches (they
// follow that class), through chains up to deferDepth long. O(deferDepth x
// affinity classes x anchored classes) for the few keys terms name.
func anchoredClasses(s *snapshot.Snapshot, classes []*snapshot.Class) anchored {
	out := anchored{}
	var affine []*snapshot.Class
	for _, c := range classes {
		if len(c.Affinity) == 0 {
			continue
		}
		affine = append(affine, c)
		for i := range c.Affinity {
			out[c.Affinity[i].TopologyKey] = nil
		}
	}
	for key := range out {
		for _, c := range classes {
			if pinnedOnKey(c, key) {
				out[key] = append(out[key], c)
			}
		}
	}
	for range deferDepth {
		grew := false
		for _, o := range affine {
			for i := range o.Affinity {
				key := o.Affinity[i].TopologyKey
				if slices.Contains(out[key], o) {
					continue
				}
				if slices.ContainsFunc(out[key], func(c *snapshot.Class) bool {
					return c != o && matchesAll(o.Affinity, c.Namespace, s.NamespaceLabels(c.Namespace), c.Labels)
				}) {
					out[key], grew = append(out[key], o), true
				}
			}
		}
		if !grew {
			break
		}
	}
	return out
}

// deferOnce moves each self-matching class behind the anchored classes
// that match its terms, as the order stands, and reports whether it moved
// any.
func deferOnce(s *snapshot.Snapshot, pods []*snapshot.Pod, self []*snapshot.Class, anchors anchored) bool {
	last := map[*snapshot.Class]int{}
	for i, p := range pods {
		last[p.Class] = i
	}
	after := map[*snapshot.Class]int{}
	for _, c := range self {
		for i := range c.Affinity {
			for _, o := range anchors[c.Affinity[i].TopologyKey] {
				if at := last[o]; o != c && at > last[c] && matchesAll(c.Affinity, o.Namespace, s.NamespaceLabels(o.Namespace), o.Labels) {
					after[c] = max(after[c], at)
				}
			}
		}
	}
	if len(after) == 0 {
		return false
	}
	moved := make(map[int][]*snapshot.Pod, len(after))
	out := make([]*snapshot.Pod, 0, len(pods))
	for i, p := range pods {
		if at, ok := after[p.Class]; ok {
			moved[at] = append(moved[at], p)
		} else {
			out = append(out, p)
		}
		out = append(out, moved[i]...)
	}
	copy(pods, out)
	return true
}

// pinnedOn reports whether class o's node selection (its node affinity,
// or its volumes') names the topology key of one of the terms: its pods
// can only be in some of the terms' domains, which a pod opening a domain
// of its own may miss.
func pinnedOn(o *snapshot.Class, terms []snapshot.AffinityTerm) bool {
	for i := range terms {
		if pinnedOnKey(o, terms[i].TopologyKey) {
			return true
		}
	}
	return false
}

// pinnedOnKey reports whether class o's node selection names key.
func pinnedOnKey(o *snapshot.Class, key string) bool {
	return o.AffinityKeys.Has(key) || (len(o.VolumeAffinity) > 0 && key != corev1.LabelHostname)
}

// matchedAlready reports whether a placed pod (bound, or planned before
// the sort) matches the class's affinity terms: kube-scheduler's
// exception for the first pod does not apply, and the class follows
// that pod's domain whatever its place in the order.
func matchedAlready(c *snapshot.Class) bool {
	k := c.AffinityCounter()
	return k != nil && k.Positive() > 0
}

// matchesAll reports whether a pod of the namespace and labels matches
// every term.
func matchesAll(terms []snapshot.AffinityTerm, ns string, nsLabels, podLabels labels.Set) bool {
	for i := range terms {
		if !terms[i].Matches(ns, nsLabels, podLabels) {
			return false
		}
	}
	return true
}

func constrained(c *snapshot.Class) int {
	if len(c.Affinity) > 0 || len(c.AntiAffinity) > 0 || len(c.Spread) > 0 {
		return 1
	}
	return 0
}

// size weighs cpu and memory at 1 core ~ 4 GiB.
func size(r *snapshot.Resources) float64 {
	return float64(r.MilliCPU)/1000 + float64(r.Memory)/(4<<30)
}
