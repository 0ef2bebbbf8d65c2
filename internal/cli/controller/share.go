package controller

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxShared bounds each table of partShare: when one holds this many
// entries it starts again empty (what objects already share stays shared;
// at most this many parts are kept alive by the table alone).
const maxShared = 4096

// partShare makes the pods and nodes the cache holds share one copy of
// the parts they have alike. Pods: the parts the pods of a workload have
// alike, the spec (but the node name), labels, annotations and owners.
// 30,000 pods of 100 Deployments then hold about 100 copies of each
// instead of 30,000; a pod's own parts (its name, UID, node, conditions)
// stay its own. Nodes: their capacity and allocatable (equal on most
// nodes of an instance type). The short strings that many objects repeat
// (namespace, node name, phase, condition types, reasons and messages,
// node label keys and values) are interned (intern).
//
// Sharing is invisible because the cache's objects are read-only: a
// client's Get and List copy them, and the readers that take them
// without a copy (clusterread, the companion, headroom, headroom target
// and node reserve controllers, the KWOK provider's size check) never
// change them, nor a part of them (a planner changes only its own
// shallow copies' own fields). A change written into a shared part would
// show in every object sharing it.
type partShare struct {
	mu     sync.Mutex
	specs  map[string]corev1.PodSpec
	maps   map[string]map[string]string
	owners map[string][]metav1.OwnerReference
	lists  map[string]corev1.ResourceList
	// strings are the interned strings (intern).
	strings map[string]string
}

func newPartShare() *partShare {
	return &partShare{specs: map[string]corev1.PodSpec{}, maps: map[string]map[string]string{}, owners: map[string][]metav1.OwnerReference{},
		lists: map[string]corev1.ResourceList{}, strings: map[string]string{}}
}

// sharePod points p's parts at the copies pods with the same parts hold.
func (s *partShare) sharePod(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := p.Spec.NodeName
	p.Spec.NodeName = ""
	if key, err := json.Marshal(&p.Spec); err == nil {
		p.Spec = shared(s.specs, string(key), p.Spec)
	}
	p.Spec.NodeName = s.intern(node)
	p.Labels = s.stringMap(p.Labels)
	p.Annotations = s.stringMap(p.Annotations)
	if len(p.OwnerReferences) > 0 {
		if key, err := json.Marshal(p.OwnerReferences); err == nil {
			p.OwnerReferences = shared(s.owners, string(key), p.OwnerReferences)
		}
	}
	p.Namespace, p.GenerateName = s.intern(p.Namespace), s.intern(p.GenerateName)
	p.Status.Phase, p.Status.QOSClass = corev1.PodPhase(s.intern(string(p.Status.Phase))), corev1.PodQOSClass(s.intern(string(p.Status.QOSClass)))
	p.Status.NominatedNodeName = s.intern(p.Status.NominatedNodeName)
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		c.Type, c.Status, c.Reason = corev1.PodConditionType(s.intern(string(c.Type))), corev1.ConditionStatus(s.intern(string(c.Status))), s.intern(c.Reason)
	}
}

// stringMap returns the shared copy of a map of strings (labels,
// annotations), found by pairsKey.
func (s *partShare) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	return shared(s.maps, pairsKey(m, func(v string) string { return v }), m)
}

// pairsKey spells a map's keys, sorted, and values (as text) with each
// one's length first, so that no two maps have the same key (annotation
// values may hold any character).
func pairsKey[K ~string, V any](m map[K]V, text func(V) string) string {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b []byte
	for _, k := range keys {
		for _, part := range [2]string{string(k), text(m[k])} {
			b = strconv.AppendInt(b, int64(len(part)), 10)
			b = append(b, ':')
			b = append(b, part...)
		}
	}
	return string(b)
}

// shareNode points n's capacity and allocatable at the copies nodes with
// the same lists hold, and interns its label keys and values and its
// conditions' strings.
func (s *partShare) shareNode(n *corev1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n.Status.Capacity = s.resourceList(n.Status.Capacity)
	n.Status.Allocatable = s.resourceList(n.Status.Allocatable)
	if len(n.Labels) > 0 {
		labels := make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			labels[s.intern(k)] = s.intern(v)
		}
		n.Labels = labels
	}
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		c.Type, c.Status = corev1.NodeConditionType(s.intern(string(c.Type))), corev1.ConditionStatus(s.intern(string(c.Status)))
		c.Reason, c.Message = s.intern(c.Reason), s.intern(c.Message)
	}
}

// resourceList returns the shared copy of a list of quantities, found
// by pairsKey of their canonical text (equal values share).
func (s *partShare) resourceList(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	return shared(s.lists, pairsKey(l, func(q resource.Quantity) string { return q.String() }), l)
}

// shared returns the value the table holds under key, or holds v there
// (starting the table again when it is full) and returns it.
func shared[T any](table map[string]T, key string, v T) T {
	if have, ok := table[key]; ok {
		return have
	}
	if len(table) >= maxShared {
		clear(table)
	}
	table[key] = v
	return v
}

// maxInterned bounds the table of interned strings: node names, label
// keys and values, condition texts (about 4 MB when full).
const maxInterned = 1 << 16

// intern returns the copy of v the table holds, or holds v there. The
// table keeps its copies alive, so objects decoded at any time share
// them; when full it starts again empty (what objects share stays
// shared).
func (s *partShare) intern(v string) string {
	if v == "" {
		return v
	}
	if have, ok := s.strings[v]; ok {
		return have
	}
	if len(s.strings) >= maxInterned {
		clear(s.strings)
	}
	s.strings[v] = v
	return v
}
