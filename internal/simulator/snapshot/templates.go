package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// SetTemplates sets the node group templates: hypothetical nodes, one per
// node group and zone, that topology spread counts as potential domains.
func (s *Snapshot) SetTemplates(ts []*Node) {
	s.templates = ts
	s.launchable = nil
	for _, t := range ts {
		t.Template = true
		if t.Flex != nil {
			t.envelope()
		}
	}
	for _, k := range s.counters {
		if k.kind == kindSpread {
			k.resetPotential(s)
		}
	}
}

// Templates returns the node group templates.
func (s *Snapshot) Templates() []*Node { return s.templates }

// TemplateAvailable reports whether a template can launch more nodes.
func (s *Snapshot) TemplateAvailable(t *Node) bool { return !s.templateOff[t] }

// DisableTemplate marks a template as unable to launch more nodes (its
// group reached a limit), so it stops being a potential domain.
func (s *Snapshot) DisableTemplate(t *Node) {
	if s.templateOff[t] {
		return
	}
	s.disableTemplate(t)
	s.record(undo{kind: undoDisableTemplate, node: t})
}

// EnableTemplate reverses DisableTemplate: the template's group can launch
// again (a planned node left the plan), so it is a potential domain again.
func (s *Snapshot) EnableTemplate(t *Node) {
	if !s.templateOff[t] {
		return
	}
	s.enableTemplate(t)
	s.record(undo{kind: undoEnableTemplate, node: t})
}

func (s *Snapshot) enableTemplate(t *Node) {
	delete(s.templateOff, t)
	for _, k := range s.counters {
		if k.potentialFrom(s, t) {
			k.addPotential(t.Labels()[k.key], 1)
		}
	}
}

func (s *Snapshot) disableTemplate(t *Node) {
	s.templateOff[t] = true
	for _, k := range s.counters {
		if k.potentialFrom(s, t) {
			k.addPotential(t.Labels()[k.key], -1)
		}
	}
}

// Cordon marks a node unschedulable, as a drain does: no pod is placed on
// it any more, but it stays in the snapshot, so that topology spread still
// counts its domain as the scheduler sees a draining node. Journaled. O(1).
func (s *Snapshot) Cordon(n *Node) {
	if n.Unschedulable {
		return
	}
	n.Unschedulable = true
	s.record(undo{kind: undoCordon, node: n})
}

// Retire drops an empty planned node from the plan: it no longer counts
// towards its group's size and limits nor as a spread domain, and no pod
// is placed on it. It stays in Nodes so that node indexes held by callers
// stay valid. Journaled. O(counters).
func (s *Snapshot) Retire(n *Node) {
	if !n.Planned || len(n.Pods) > 0 || n.Unschedulable {
		panic("snapshot: Retire of a node that is not an empty planned node")
	}
	s.account(n, -1)
	n.Unschedulable = true
	s.record(undo{kind: undoRetire, node: n})
}

// GroupCouldTake reports whether some offering of group g makes a node a
// pod of required node selection aff and tolerations could run on: it
// tolerates the group's taints and aff matches the offering's labels.
// Room and availability are not looked at.
func GroupCouldTake(g *v1alpha1.NodeGroup, aff nodeaffinity.RequiredNodeAffinity, tolerations []corev1.Toleration) bool {
	if _, untolerated := UntoleratedTaint(g.NodeTaints(), tolerations); untolerated {
		return false
	}
	for i := range g.Spec.InstanceTypes {
		it := &g.Spec.InstanceTypes[i]
		for j := range it.Offerings {
			if ok, _ := aff.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: g.NodeLabels(it, &it.Offerings[j])}}); ok {
				return true
			}
		}
	}
	return false
}
