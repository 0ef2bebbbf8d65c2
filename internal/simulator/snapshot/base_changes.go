package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/podutil"
)

// PodChanges are the pods that changed between two points of a stream of
// changes (an informer's events, numbered by the one who keeps them):
// every change after From, up to To.
//
// A controller takes them before it lists the pods for a round (the list
// is then as new as To, or newer), and gives every round's changes to the
// base: the base reads them instead of every pod of the cluster when
// From is the To of the changes it was given the round before, and looks
// at every pod (Input.Pods) otherwise.
type PodChanges struct {
	From, To uint64
	Pods     map[types.NamespacedName]PodChange
}

// PodChange is what the events told of one pod.
type PodChange struct {
	// Seen are the objects the events carried, old and new, oldest
	// first: the one the base holds (read at an earlier round) is among
	// them.
	Seen []*corev1.Pod
	// Latest is the pod now; nil when it was deleted.
	Latest *corev1.Pod
}

// followsChanges reports whether ch take up where the base's last round
// left off.
func (b *Base) followsChanges(ch *PodChanges) bool {
	return ch != nil && b.changesKnown && ch.From == b.changesTo
}

// noteChanges records the changes the round was given, as the point the
// next round's changes must start from.
func (b *Base) noteChanges(ch *PodChanges) {
	b.changesKnown = ch != nil
	if ch != nil {
		b.changesTo = ch.To
	}
}

// applyChanges brings the base's pods up to date with the changed pods
// only. O(changed pods + pods bound to nodes the base does not have).
// It returns false when a pod cannot be followed incrementally.
func (b *Base) applyChanges(ch *PodChanges, gen uint64) bool {
	for key, c := range ch.Pods {
		delete(b.loose, key)
		held := false
		for _, old := range c.Seen {
			e := b.pods[old]
			if e == nil {
				continue
			}
			if old == c.Latest && e.rv == old.ResourceVersion && e.p.Node.Name == old.Spec.NodeName {
				held = true // the base has the pod as it is
				break
			}
			b.s.unplace(e.p)
			delete(b.pods, old)
			break
		}
		if !held && c.Latest != nil && podutil.IsBound(c.Latest) && !b.add(c.Latest, gen) {
			return false
		}
	}
	for key, p := range b.loose {
		if b.s.byName[p.Spec.NodeName] != nil {
			delete(b.loose, key)
			if !b.add(p, gen) {
				return false
			}
		}
	}
	return true
}

// add places bound pod p on its node, or keeps it aside until its node
// comes (loose). It returns false when p cannot be followed
// incrementally (resource claims; a class New would refuse).
func (b *Base) add(p *corev1.Pod, gen uint64) bool {
	s := b.s
	n := s.byName[p.Spec.NodeName]
	if n == nil {
		b.loose[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
		return true
	}
	if len(p.Spec.ResourceClaims) > 0 {
		return false
	}
	c, err := s.classify(p, true)
	if err != nil {
		return false // New reports it
	}
	placed := &Pod{Pod: p, Class: c}
	s.AddPod(placed, n)
	b.pods[p] = &basePod{p: placed, rv: p.ResourceVersion, gen: gen}
	return true
}

// looseOf collects the bound pods of pods whose node the base does not
// have.
func (b *Base) looseOf(pods []*corev1.Pod) {
	clear(b.loose)
	for _, p := range pods {
		if podutil.IsBound(p) && b.s.byName[p.Spec.NodeName] == nil {
			b.loose[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
		}
	}
}

// hold places the round's held pods in its fork (Release takes them
// off). A pod on a node the base does not have is left out, as New
// leaves it out.
func (b *Base) hold(pods []*corev1.Pod) error {
	s := b.s
	for _, p := range pods {
		n := s.byName[p.Spec.NodeName]
		if n == nil || !podutil.IsBound(p) {
			continue
		}
		c, err := s.classify(p, true)
		if err != nil {
			return err
		}
		s.AddPod(&Pod{Pod: p, Class: c}, n)
	}
	return nil
}
