package snapshot

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/dynamicresources"
)

type undoKind uint8

const (
	undoAddNode undoKind = iota
	undoAddPod
	undoRemovePod
	undoDisableTemplate
	undoEnableTemplate
	undoCordon
	undoRetire
	undoWiden
	undoTaint
)

// undo is one recorded change and what is needed to reverse it. It is
// small (a scale-down round journals every pod it moves): what only a
// flexible node needs is behind a pointer.
type undo struct {
	kind undoKind
	// addOn is whether a removed pod carried its companion's requests.
	addOn bool
	// slot is where a removed pod was in its node's Pods.
	slot int32
	node *Node
	pod  *Pod
	// flex is a flexible node's state before a pod was added or its
	// options were widened.
	flex *flexUndo
	// shadowed is the node an added node's name stood for before it
	// (a planned node named as an existing one), restored on undo.
	shadowed *Node
	// devices is the Placement an added pod kept before AddPod replaced
	// it: undoing the add gives it back, so that undoing the RemovePod
	// before it holds the devices the pod had, not those of the node the
	// fork tried.
	devices *dynamicresources.Placement[*Option]
	// taints are a node's taints before Taint.
	taints *[]corev1.Taint
}

// flexUndo is a flexible node's Flex and envelope before a pod was added
// or it was widened.
type flexUndo struct {
	flex     *Flex
	alloc    Resources
	allowed  int
	capacity Resources
	current  *Option
}

// record appends a change to the journal while a Fork is open.
func (s *Snapshot) record(u undo) {
	if len(s.marks) > 0 {
		s.journal = append(s.journal, u)
	}
}

// WithFork runs trial on a fork of the snapshot. The changes trial makes
// are kept only when it returns keep=true and no error; otherwise, and
// when it panics, they are reverted, so that a trial can never leak into
// the snapshot or leave a fork open (Cluster Autoscaler's
// WithForkedSnapshot). Prefer it to pairing Fork with Revert by hand.
func (s *Snapshot) WithFork(trial func() (keep bool, err error)) error {
	s.Fork()
	done := false
	defer func() {
		if !done {
			s.Revert()
		}
	}()
	keep, err := trial()
	done = true
	if keep && err == nil {
		s.Commit()
	} else {
		s.Revert()
	}
	return err
}

// Fork starts a set of changes that Revert can undo. Forks nest. O(1).
func (s *Snapshot) Fork() { s.marks = append(s.marks, len(s.journal)) }

// Commit keeps the changes since the matching Fork. O(1).
func (s *Snapshot) Commit() {
	s.marks = s.marks[:len(s.marks)-1]
	if len(s.marks) == 0 {
		s.journal = s.journal[:0]
	}
}

// Revert undoes every change since the matching Fork, newest first.
// O(changes since the Fork).
func (s *Snapshot) Revert() {
	mark := s.marks[len(s.marks)-1]
	s.marks = s.marks[:len(s.marks)-1]
	for len(s.journal) > mark {
		u := s.journal[len(s.journal)-1]
		s.journal = s.journal[:len(s.journal)-1]
		s.reverse(u)
	}
}

func (s *Snapshot) reverse(u undo) {
	switch u.kind {
	case undoAddPod:
		s.unplace(u.pod)
		u.pod.devices = u.devices
		if u.flex != nil {
			s.restoreFlex(u.node, u.flex)
		}
	case undoWiden:
		s.restoreFlex(u.node, u.flex)
	case undoRemovePod:
		s.replace(u.pod, u.node, int(u.slot), u.addOn)
	case undoAddNode:
		n := u.node
		s.account(n, -1)
		s.removeFromShape(n)
		s.Nodes = s.Nodes[:len(s.Nodes)-1]
		s.roomsFrom(len(s.Nodes))
		if u.shadowed != nil {
			s.byName[n.Name] = u.shadowed
		} else {
			delete(s.byName, n.Name)
		}
	case undoCordon:
		u.node.Unschedulable = false
	case undoTaint:
		s.setTaints(u.node, *u.taints)
	case undoRetire:
		n := u.node
		n.Unschedulable = false
		s.account(n, 1)
	case undoDisableTemplate:
		s.enableTemplate(u.node)
	case undoEnableTemplate:
		s.disableTemplate(u.node)
	}
}

// restoreFlex puts back a flexible node's options and envelope.
func (s *Snapshot) restoreFlex(n *Node, f *flexUndo) {
	s.dra.Changed()
	n.Flex = f.flex
	n.Allocatable, n.AllowedPods, n.Current = f.alloc, f.allowed, f.current
	s.setCapacity(n, f.capacity)
}
