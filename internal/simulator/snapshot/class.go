package snapshot

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
)

// Class is what the scheduler's filters see of a pod. Pods with equal
// scheduling-relevant fields (namespace, labels, requests, node selection,
// tolerations, pod affinity, spread, host ports, volumes) share one Class,
// so that everything derived from them is computed once per class rather
// than once per pod: a Deployment of 1,000 replicas is one class.
type Class struct {
	// ID is dense (0, 1, 2, ...) within a snapshot; caches index by it.
	ID int
	// Example is the first pod seen of the class.
	Example *corev1.Pod

	Namespace string
	Labels    labels.Set
	// Requests are what the pod needs on a node: its own requests plus, for
	// a workload with a companion, the companion's (AddOn), unless the node
	// already has the companion's share key (RequestsOn).
	Requests Resources
	// Base are the pod's own requests; AddOn its companion's.
	Base  Resources
	AddOn Resources
	// ShareKey is the companion share key of the pod, "" for none.
	ShareKey string
	// AddOnPods is how many pods the add-on stands for besides the pod
	// itself (the followers folded into it; Snapshot.SetAddOnPods), so
	// that a node's pod capacity holds them too.
	AddOnPods int
	// NodeName is spec.nodeName of a pod to place; empty in the classes of
	// the pods a snapshot is built with (their node is Pod.Node).
	NodeName string
	Priority int32
	// Terminating pods (deletionTimestamp set) are not counted by topology
	// spread.
	Terminating bool

	// NodeAffinity is nodeSelector AND required node affinity.
	NodeAffinity nodeaffinity.RequiredNodeAffinity
	// HasNodeAffinity is false when the pod selects any node.
	HasNodeAffinity bool
	// NamesNodes is set when the pod's node selection reads what differs
	// between nodes of one shape (Node.Shape): spec.nodeName, the hostname
	// label, matchFields, or the node affinity of a bound volume (often a
	// hostname). Filters then make no failure Static for the class.
	NamesNodes bool
	// AffinityKeys are the node label keys nodeSelector and node affinity
	// mention; the planner uses them to know which labels of a node that
	// is not launched yet matter.
	AffinityKeys sets.Set[string]

	Tolerations  []corev1.Toleration
	HostPorts    []HostPort
	Affinity     []AffinityTerm
	AntiAffinity []AffinityTerm
	Spread       []SpreadConstraint

	// Preferred is the pod's preferred node affinity (nil when none), and
	// SoftSpread its ScheduleAnyway spread constraints: what kube-scheduler
	// scores and the planner follows where price does not decide.
	Preferred  *nodeaffinity.PreferredSchedulingTerms
	SoftSpread []SpreadConstraint

	// nodeSelection identifies nodeSelector plus required node affinity;
	// tolerationsID the tolerations. Spread counters that depend on them
	// are shared only between classes with equal ids.
	nodeSelection string
	tolerationsID string

	// OncePodClaims are the pod's claims with the ReadWriteOncePod access
	// mode: while another placed pod uses one, the pod fits no node.
	OncePodClaims []types.NamespacedName
	// VolumeAffinity are the node affinities of the PersistentVolumes the
	// pod's bound claims use; VolumeError explains a claim that cannot be
	// resolved (missing claim or volume).
	VolumeAffinity []*nodeaffinity.NodeSelector
	VolumeError    string
	// VolumeKeys are the node label keys VolumeAffinity's volumes' node
	// affinity reads (nil when none).
	VolumeKeys sets.Set[string]

	// Claims are the pod's ResourceClaims; ClaimWait says why the pod
	// waits for a claim that does not exist yet (then Claims is empty).
	Claims    []dynamicresources.PodClaim
	ClaimWait string

	// counters are the counters this class's pods are counted in; kept up
	// to date as counters are registered.
	counters []*Counter
	// spreadCounters[i] counts for Spread[i]; affinityCounter counts pods
	// matching all Affinity terms; antiCounters[i] counts for
	// AntiAffinity[i]. Registered on first use.
	spreadCounters  []*Counter
	softCounters    []*Counter
	affinityCounter *Counter
	antiCounters    []*Counter
	// existingAnti holds, for a class whose pods carry anti-affinity terms,
	// one counter per term over the nodes its placed pods run on.
	existingAnti []*Counter
	// blocking are the existing-anti counters of any class whose term
	// matches this class; blockingSeen how many of Snapshot.existingAnti
	// have been checked.
	blocking     []*Counter
	blockingSeen int
	// matchCache memoises counter.matches(class) by counter ID: 0 unknown,
	// 1 true, 2 false.
	matchCache []tristate
	// placed is how many pods of the class are on nodes.
	placed int
	// key is the class's fingerprint, its key in Snapshot.classes;
	// constraints its fingerprint without requests (Snapshot.Constraints),
	// 0 until asked for.
	key, constraints uint64
}

// Constraints returns a fingerprint of everything the class's pods are
// placed by except their requests (and limits, overhead): namespace,
// labels, priority, node selection, tolerations, host ports, pod
// affinity and spread, volumes and claims. Two pending pods with equal
// Constraints face the same filters and are counted by the same
// selectors, so swapping where they run keeps a plan valid for
// kube-scheduler, which places pods one at a time: in the order the plan
// was valid in, with the two swapped, each meets the checks the other
// met (room aside).
func (s *Snapshot) Constraints(c *Class) uint64 {
	if c.constraints == 0 {
		c.constraints = s.fp.constraints(c.Example) | 1 // 0 means not yet
	}
	return c.constraints
}

// Placed returns how many pods of the class are on nodes.
func (c *Class) Placed() int { return c.placed }

// HostPort is a host port a container asks for.
type HostPort struct {
	IP       string
	Protocol corev1.Protocol
	Port     int32
}

// Conflicts reports whether two host ports cannot be held on one node:
// protocol and port are equal and the IPs are equal or one of them is
// 0.0.0.0 (kube-scheduler's NodePorts).
func (h HostPort) Conflicts(o HostPort) bool {
	return h.Port == o.Port && h.Protocol == o.Protocol && (h.IP == o.IP || h.IP == "0.0.0.0" || o.IP == "0.0.0.0")
}

// AffinityTerm is a required pod (anti-)affinity term, resolved as
// kube-scheduler resolves it: a term without namespaces and without a
// namespace selector applies to the pod's own namespace; a nil namespace
// selector matches no namespace, an empty one every namespace.
type AffinityTerm struct {
	Namespaces        sets.Set[string]
	NamespaceSelector labels.Selector
	Selector          labels.Selector
	TopologyKey       string
	// signature identifies the term: equal signatures select the same pods in the same
	// domains, so counters for them are shared.
	signature string
}

func (t *AffinityTerm) computeSignature() {
	t.signature = strings.Join(sets.List(t.Namespaces), ",") + "|" + selectorKey(t.NamespaceSelector) + "|" + selectorKey(t.Selector) + "|" + t.TopologyKey
}

// selectorKey names what a selector selects: its String, but for the two
// selectors that print alike as "", one that selects everything (an empty
// selector, {}) and one that selects nothing (a nil selector).
func selectorKey(s labels.Selector) string {
	if k := s.String(); k != "" {
		return k
	}
	if s.Empty() {
		return "<all>"
	}
	return "<none>"
}

// Matches reports whether a pod with the given namespace (and namespace
// labels) and labels is selected by the term. Unknown namespace labels are
// an empty set, as in kube-scheduler: an empty namespaceSelector (all
// namespaces) still matches, a selector that requires a label does not.
func (t *AffinityTerm) Matches(namespace string, nsLabels labels.Set, podLabels labels.Set) bool {
	if t.Namespaces.Has(namespace) || t.NamespaceSelector.Matches(nsLabels) {
		return t.Selector.Matches(podLabels)
	}
	return false
}

// SpreadConstraint is a DoNotSchedule topology spread constraint with the
// scheduler's defaults applied (minDomains 1, nodeAffinityPolicy Honor,
// nodeTaintsPolicy Ignore) and matchLabelKeys merged into the selector.
type SpreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	Selector           labels.Selector
	MinDomains         int32
	NodeAffinityPolicy corev1.NodeInclusionPolicy
	NodeTaintsPolicy   corev1.NodeInclusionPolicy
	// SelfMatch is true when the pod matches its own selector.
	SelfMatch bool
}

// newClass derives a Class from a pod. Claims and volumes resolve PVC to
// PV node affinity.
func newClass(id int, pod *corev1.Pod, placed bool, vols volumeLookup, dra *draModel, addOnPods map[string]int) (*Class, error) {
	c := &Class{
		ID:          id,
		Example:     pod,
		Namespace:   pod.Namespace,
		Labels:      labels.Set(pod.Labels),
		NodeName:    pod.Spec.NodeName,
		Terminating: pod.DeletionTimestamp != nil,
		Tolerations: pod.Spec.Tolerations,
	}
	if placed {
		c.NodeName = "" // shared by the workload's pods on every node
	}
	if pod.Spec.Priority != nil {
		c.Priority = *pod.Spec.Priority
	}
	c.Base = FromList(RequestsOf(pod))
	c.ShareKey = pod.Labels[v1alpha1.LabelCompanionShareKey]
	c.AddOn = companionRequests(pod)
	if !c.AddOn.IsZero() {
		c.AddOnPods = addOnPods[c.ShareKey]
	}
	c.Requests = c.Base.Clone()
	c.Requests.Add(&c.AddOn)
	c.NodeAffinity = nodeaffinity.GetRequiredNodeAffinity(pod)
	c.AffinityKeys = nodeAffinityKeys(pod)
	c.HasNodeAffinity = len(pod.Spec.NodeSelector) > 0 || requiredNodeSelector(pod) != nil
	c.nodeSelection, c.tolerationsID = selectionIDs(pod)
	c.HostPorts = HostPortsOf(pod)
	var err error
	if c.Affinity, c.AntiAffinity, err = affinityTerms(pod); err != nil {
		return nil, err
	}
	if c.Spread, err = spreadConstraints(pod, corev1.DoNotSchedule); err != nil {
		return nil, err
	}
	if c.SoftSpread, err = spreadConstraints(pod, corev1.ScheduleAnyway); err != nil {
		return nil, err
	}
	if c.Preferred, err = preferredNodeAffinity(pod); err != nil {
		return nil, err
	}
	c.VolumeAffinity, c.VolumeKeys, c.VolumeError = vols.nodeAffinities(pod)
	c.OncePodClaims = vols.oncePodClaims(pod)
	c.NamesNodes = c.NodeName != "" || c.AffinityKeys.Has(corev1.LabelHostname) || hasMatchFields(pod) || len(c.VolumeAffinity) > 0
	c.Claims, c.ClaimWait = dra.Resolve(pod)
	return c, nil
}

func selectionIDs(pod *corev1.Pod) (string, string) {
	f := &fingerprinter{}
	f.sortedMap(pod.Spec.NodeSelector)
	if ns := requiredNodeSelector(pod); ns != nil {
		f.proto(ns)
	}
	sel := string(f.buf)
	f.buf = f.buf[:0]
	for i := range pod.Spec.Tolerations {
		f.proto(&pod.Spec.Tolerations[i])
	}
	return sel, string(f.buf)
}

func requiredNodeSelector(pod *corev1.Pod) *corev1.NodeSelector {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

func hasMatchFields(pod *corev1.Pod) bool {
	if ns := requiredNodeSelector(pod); ns != nil {
		for _, t := range ns.NodeSelectorTerms {
			if len(t.MatchFields) > 0 {
				return true
			}
		}
	}
	return false
}

func nodeAffinityKeys(pod *corev1.Pod) sets.Set[string] {
	keys := sets.New[string]()
	for k := range pod.Spec.NodeSelector {
		keys.Insert(k)
	}
	if ns := requiredNodeSelector(pod); ns != nil {
		for _, t := range ns.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				keys.Insert(e.Key)
			}
		}
	}
	return keys
}

// HostPortsOf are the host ports a pod holds while it runs: its
// containers' and its sidecars'.
func HostPortsOf(pod *corev1.Pod) []HostPort {
	var out []HostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			// Of init containers only sidecars (restartPolicy Always) hold
			// their ports for the pod's lifetime.
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := HostPort{IP: p.HostIP, Protocol: p.Protocol, Port: p.HostPort}
				if hp.IP == "" {
					hp.IP = "0.0.0.0"
				}
				if hp.Protocol == "" {
					hp.Protocol = corev1.ProtocolTCP
				}
				out = append(out, hp)
			}
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

func affinityTerms(pod *corev1.Pod) (aff, anti []AffinityTerm, err error) {
	a := pod.Spec.Affinity
	if a == nil {
		return nil, nil, nil
	}
	convert := func(terms []corev1.PodAffinityTerm) ([]AffinityTerm, error) {
		out := make([]AffinityTerm, 0, len(terms))
		for i := range terms {
			t, err := newAffinityTerm(pod, &terms[i])
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, nil
	}
	if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		if aff, err = convert(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, nil, fmt.Errorf("pod affinity: %w", err)
		}
	}
	if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		if anti, err = convert(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, nil, fmt.Errorf("pod anti-affinity: %w", err)
		}
	}
	return aff, anti, nil
}

// selectsOn reports whether a label selector has a requirement on key.
func selectsOn(s *metav1.LabelSelector, key string) bool {
	if s == nil {
		return false
	}
	if _, ok := s.MatchLabels[key]; ok {
		return true
	}
	return slices.ContainsFunc(s.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return r.Key == key })
}

func newAffinityTerm(pod *corev1.Pod, t *corev1.PodAffinityTerm) (AffinityTerm, error) {
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return AffinityTerm{}, err
	}
	// matchLabelKeys and mismatchLabelKeys are merged into the selector by
	// the API server when the pod is created, with the labels it had then,
	// and kube-scheduler reads the selector only. A key the selector
	// names already was merged so (the API server refuses a key in both):
	// merged again with labels changed since, the selector would select
	// nothing. A pod read from a file is merged here, as admitted.
	for _, k := range t.MatchLabelKeys {
		if v, ok := pod.Labels[k]; ok && !selectsOn(t.LabelSelector, k) {
			r, err := labels.NewRequirement(k, "in", []string{v})
			if err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	for _, k := range t.MismatchLabelKeys {
		if v, ok := pod.Labels[k]; ok && !selectsOn(t.LabelSelector, k) {
			r, err := labels.NewRequirement(k, "notin", []string{v})
			if err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	nsSel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
	if err != nil {
		return AffinityTerm{}, err
	}
	ns := sets.New(t.Namespaces...)
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		ns.Insert(pod.Namespace)
	}
	at := AffinityTerm{Namespaces: ns, NamespaceSelector: nsSel, Selector: sel, TopologyKey: t.TopologyKey}
	at.computeSignature()
	return at, nil
}

// HasPreferences reports whether pods of the class have soft terms the
// planner follows: preferred node affinity or ScheduleAnyway spread.
func (c *Class) HasPreferences() bool { return c.Preferred != nil || len(c.SoftSpread) > 0 }

func preferredNodeAffinity(pod *corev1.Pod) (*nodeaffinity.PreferredSchedulingTerms, error) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return nil, nil
	}
	t, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return nil, fmt.Errorf("preferred node affinity: %w", err)
	}
	return t, nil
}

// spreadConstraints returns the pod's spread constraints of one kind
// (DoNotSchedule or ScheduleAnyway).
func spreadConstraints(pod *corev1.Pod, when corev1.UnsatisfiableConstraintAction) ([]SpreadConstraint, error) {
	var out []SpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != when {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("topology spread constraint %s: %w", c.TopologyKey, err)
		}
		if len(c.MatchLabelKeys) > 0 {
			match := labels.Set{}
			for _, k := range c.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					match[k] = v
				}
			}
			if len(match) > 0 {
				merged := labels.SelectorFromSet(match)
				if reqs, ok := sel.Requirements(); ok {
					for _, r := range reqs {
						merged = merged.Add(r)
					}
					sel = merged
				}
			}
		}
		sc := SpreadConstraint{
			MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, Selector: sel, MinDomains: 1,
			NodeAffinityPolicy: corev1.NodeInclusionPolicyHonor, NodeTaintsPolicy: corev1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			sc.MinDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			sc.NodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			sc.NodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		sc.SelfMatch = sel.Matches(labels.Set(pod.Labels))
		out = append(out, sc)
	}
	return out, nil
}

// RequestsOf is what kube-scheduler counts a pod as requesting: its
// containers' requests, or its pod-level requests (sidecars and overhead
// as the KEPs say), and while an in-place resize of either is pending or
// in progress the larger of those and what the kubelet reports allocated
// and actuated (only the reported ones when the resize is infeasible).
// kube-scheduler 1.36 reads pod-level resizes too
// (InPlacePodLevelResourcesVerticalScaling, beta, on by default).
func RequestsOf(pod *corev1.Pod) corev1.ResourceList {
	return resource.PodRequests(pod, resource.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true})
}

// MatchesOption reports whether a planned node launched as the option
// whose node is on satisfies the class's node selection and its bound
// volumes' node affinity (VolumeBinding: a volume whose affinity names
// an instance type or an architecture takes the pod to that offering).
func (c *Class) MatchesOption(on *corev1.Node) bool {
	if ok, _ := c.NodeAffinity.Match(on); !ok {
		return false
	}
	for _, sel := range c.VolumeAffinity {
		if !sel.Match(on) {
			return false
		}
	}
	return true
}
