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
// A controller names the pods its informer's events name, and when it
// takes them for a round, reads each one as it is then (Pods: the pod
// now, nil once gone). It takes them before it lists the pods for the
// round (the list is then as new as the changes, or newer) and gives
// every round's changes to the base: the base reads them instead of every
// pod of the cluster when From is the To of the changes it was given
// before (Base.Postpone keeps those of a round that did not plan), and
// looks at every pod (Input.Pods) otherwise.
type PodChanges struct {
	From, To uint64
	Pods     map[types.NamespacedName]*corev1.Pod
}

// keyOf is a pod's key in the base.
func keyOf(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// maxPostponed bounds the pods named by postponed changes: past it they
// are dropped, and the next round looks at every pod.
const maxPostponed = 1_000_000

// Postpone keeps the changes of a round that did not take a snapshot
// (nothing to plan), so that the next round's changes still follow on:
// they are read with them. The base takes ch's pods (the caller must not
// change them after). Changes that do not follow on from the base's last
// round are dropped (the next round then looks at every pod, as it would
// anyway), as are postponed changes past maxPostponed pods. A nil base
// does nothing.
func (b *Base) Postpone(ch *PodChanges) {
	if b == nil || ch == nil || b.alreadyRead(ch) {
		return
	}
	switch p := b.postponed; {
	case p != nil && ch.From == p.To && len(p.Pods)+len(ch.Pods) <= maxPostponed:
		b.postponed = merge(p, ch)
	case p == nil && b.s != nil && b.followsChanges(ch) && len(ch.Pods) <= maxPostponed:
		b.postponed = ch
	default:
		b.postponed = nil
	}
}

// merge adds b's changes to a's (b's pods win) and returns a.
func merge(a, b *PodChanges) *PodChanges {
	if a.Pods == nil {
		a.Pods = map[types.NamespacedName]*corev1.Pod{}
	}
	for k, p := range b.Pods {
		a.Pods[k] = p
	}
	a.To = b.To
	return a
}

// alreadyRead reports whether the base has read ch, or keeps it
// postponed: a round planned again on the same input (a retry).
func (b *Base) alreadyRead(ch *PodChanges) bool {
	return (b.changesKnown && ch.To == b.changesTo && b.postponed == nil) || (b.postponed != nil && ch.To == b.postponed.To)
}

// changesOf returns the changes of the round: its own, after those
// postponed when they follow on; none new when it read them already.
func (b *Base) changesOf(ch *PodChanges) *PodChanges {
	if ch != nil && b.postponed == nil && b.changesKnown && ch.To == b.changesTo {
		return &PodChanges{From: ch.To, To: ch.To} // read already: nothing new
	}
	p := b.postponed
	b.postponed = nil
	if ch == nil || p == nil || ch.From != p.To {
		return ch
	}
	return merge(p, ch)
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
// only: whatever the base holds under a changed pod's name is taken off,
// unless it is the pod now, and the pod now added. O(changed pods + pods
// bound to nodes the base does not have). It returns false when a pod
// cannot be followed incrementally.
func (b *Base) applyChanges(ch *PodChanges, gen uint64) bool {
	for key, p := range ch.Pods {
		delete(b.loose, key)
		if e := b.byKey[key]; e != nil {
			if p != nil && e.p.Pod == p && e.rv == p.ResourceVersion && e.p.Node.Name == p.Spec.NodeName {
				continue // the base has the pod as it is
			}
			b.drop(e)
		}
		if p != nil && podutil.IsBound(p) && !b.add(p, gen) {
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

// drop takes a pod off its node and out of the base.
func (b *Base) drop(e *basePod) {
	b.s.unplace(e.p)
	delete(b.pods, e.p.Pod)
	delete(b.byKey, keyOf(e.p.Pod))
}

// add places bound pod p on its node, or keeps it aside until its node
// comes (loose), in place of anything the base holds under its name. It
// returns false when p cannot be followed incrementally (resource claims;
// a class New would refuse).
func (b *Base) add(p *corev1.Pod, gen uint64) bool {
	s := b.s
	key := keyOf(p)
	if e := b.byKey[key]; e != nil {
		b.drop(e) // another object of the same name (a pod made again)
	}
	n := s.byName[p.Spec.NodeName]
	if n == nil {
		b.loose[key] = p
		return true
	}
	delete(b.loose, key)
	if len(p.Spec.ResourceClaims) > 0 {
		return false
	}
	c, err := s.classify(p, true)
	if err != nil {
		return false // New reports it
	}
	placed := &Pod{Pod: p, Class: c}
	s.AddPod(placed, n)
	e := &basePod{p: placed, rv: p.ResourceVersion, gen: gen}
	b.pods[p], b.byKey[key] = e, e
	return true
}

// looseOf collects the bound pods of pods whose node the base does not
// have.
func (b *Base) looseOf(pods []*corev1.Pod) {
	clear(b.loose)
	for _, p := range pods {
		if podutil.IsBound(p) && b.s.byName[p.Spec.NodeName] == nil {
			b.loose[keyOf(p)] = p
		}
	}
}

// hold places the round's held pods in its fork (Release takes them
// off). A pod on a node the base does not have is left out, as New
// leaves it out.
func (b *Base) hold(pods []*corev1.Pod) error {
	for _, p := range pods {
		n, c, err := b.s.boundClass(p)
		if err != nil {
			return err
		}
		if n != nil {
			b.s.AddPod(&Pod{Pod: p, Class: c}, n)
		}
	}
	return nil
}
