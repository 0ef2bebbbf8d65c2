package snapshot

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// shapes groups the existing nodes of a snapshot by what the static
// filters read of a node: its labels (the hostname's value aside: every
// node has its own) and the taints that keep pods off. Nodes of one shape
// answer a static filter alike, so a caller that learned one node of a
// shape is unusable for a class can skip the others without evaluating
// them (binpack does: on a large cluster most nodes share a few shapes).
// A shape's ID is exact: the canonical text is interned, not hashed.
type shapes struct {
	ids   map[string]int32
	nodes [][]int // by ID-1: indexes into Snapshot.Nodes, ascending
	buf   []byte
	keys  []string // shapeOf's, kept for the next call
	// version counts the changes of nodes; hostnames (Snapshot.hostnames)
	// were counted at hostnamesOf.
	version, hostnamesOf uint64
	hostnames            map[string]int
	// tainted are the shapes Taint made (a node's shape with a drain's
	// taint): empty between rounds, they say nothing of nodes gone.
	tainted map[int32]bool
}

// shapeOf returns the ID of a node's shape, interning it on first sight.
func (s *Snapshot) shapeOf(n *Node) int32 {
	sh := &s.shapes
	if sh.ids == nil {
		sh.ids = map[string]int32{}
	}
	b := sh.buf[:0]
	labels := n.Labels()
	keys := sh.keys[:0]
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	defer func() { clear(keys); sh.keys = keys[:0] }()
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, '=')
		if k != corev1.LabelHostname {
			b = append(b, labels[k]...)
		}
		b = append(b, 0)
	}
	b = append(b, 1)
	for _, t := range n.Taints {
		b = append(b, t.Key...)
		b = append(b, '=')
		b = append(b, t.Value...)
		b = append(b, ':')
		b = append(b, t.Effect...)
		b = append(b, 0)
	}
	sh.buf = b
	if id, ok := sh.ids[string(b)]; ok {
		return id
	}
	id := int32(len(sh.nodes) + 1)
	sh.ids[string(b)] = id
	sh.nodes = append(sh.nodes, nil)
	return id
}

// addToShape indexes an existing node (the last one of s.Nodes) by its
// shape; planned nodes and templates have none (their labels narrow as
// their options do).
func (s *Snapshot) addToShape(n *Node) {
	if n.Planned || n.Template {
		return
	}
	n.Shape = s.shapeOf(n)
	s.shapes.nodes[n.Shape-1] = append(s.shapes.nodes[n.Shape-1], len(s.Nodes)-1)
	s.shapes.version++
}

// removeFromShape undoes addToShape for the last node of s.Nodes.
func (s *Snapshot) removeFromShape(n *Node) {
	if n.Shape == 0 {
		return
	}
	idx := s.shapes.nodes[n.Shape-1]
	s.shapes.nodes[n.Shape-1] = idx[:len(idx)-1]
	n.Shape = 0
	s.shapes.version++
}

// reindexShapes rebuilds the index of existing nodes by shape after nodes
// were taken out of the middle of Nodes (Base): the indexes after them
// moved. O(nodes).
func (s *Snapshot) reindexShapes() {
	s.shapes.version++
	for i := range s.shapes.nodes {
		s.shapes.nodes[i] = s.shapes.nodes[i][:0]
	}
	for i, n := range s.Nodes {
		if n.Shape > 0 {
			s.shapes.nodes[n.Shape-1] = append(s.shapes.nodes[n.Shape-1], i)
		}
	}
}

// NodesOfShape returns the indexes in Nodes of the existing nodes of one
// shape (Node.Shape), ascending. The slice must not be modified.
func (s *Snapshot) NodesOfShape(id int32) []int {
	if id <= 0 || int(id) > len(s.shapes.nodes) {
		return nil
	}
	return s.shapes.nodes[id-1]
}
