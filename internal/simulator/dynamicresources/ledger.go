package dynamicresources

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Placement is what one pod's placement allocated, per option (the zero O
// on a node without options): devices of its own claims, and of the shared
// claims it allocated first or was the last user of. The snapshot keeps it
// with the pod, so that placing the pod again (a Revert) takes the same
// devices back.
type Placement[O Option] struct {
	perPod map[O][]structured.DeviceID
	shared map[ClaimKey]map[O][]structured.DeviceID
}

// site is where the plan allocates devices: a node, and for a planned
// node whose instance type is not chosen yet, one of its options.
type site[N comparable, O Option] struct {
	n N
	o O
}

type claimUse[N comparable, O Option] struct {
	node N
	pods int
	// devices the claim was allocated, per option of a planned node (zero
	// key for other nodes); nil for claims allocated in the cluster.
	devices map[O][]structured.DeviceID
}

// Place records that a pod with the given claims was placed on node n,
// taking the devices of p (its Placement, nil when it allocated nothing):
// it holds them, and counts the pod's uses of shared claims (where the
// plan allocates a claim that is not allocated yet, and how many
// reservations the plan adds). O(claims + devices).
func (m *Model[N, O]) Place(n N, p *Placement[O], claims []PodClaim) {
	if p != nil {
		for o, ids := range p.perPod {
			m.hold(n, o, ids, 1)
		}
	}
	for i := range claims {
		pc := &claims[i]
		if !sharedUse(pc) {
			continue
		}
		u := m.uses[pc.Key]
		if u == nil {
			u = &claimUse[N, O]{node: n}
			if p != nil {
				u.devices = p.shared[pc.Key]
			}
			for o, ids := range u.devices {
				m.hold(n, o, ids, 1)
			}
			m.uses[pc.Key] = u
		}
		u.pods++
	}
}

// Unplace undoes Place for a pod taken off node n: it releases the pod's
// own devices, and the devices of each shared claim the pod was the last
// user of. It returns the Placement the pod keeps: p, or a new one when p
// is nil, with the devices of those shared claims added, so that placing
// the pod again takes them back. O(claims + devices).
func (m *Model[N, O]) Unplace(n N, p *Placement[O], claims []PodClaim) *Placement[O] {
	if p != nil {
		for o, ids := range p.perPod {
			m.hold(n, o, ids, -1)
		}
	}
	for i := range claims {
		pc := &claims[i]
		if !sharedUse(pc) {
			continue
		}
		u := m.uses[pc.Key]
		u.pods--
		if u.pods > 0 {
			continue
		}
		for o, ids := range u.devices {
			m.hold(n, o, ids, -1)
		}
		if u.devices != nil {
			if p == nil {
				p = &Placement[O]{}
			}
			if p.shared == nil {
				p.shared = map[ClaimKey]map[O][]structured.DeviceID{}
			}
			p.shared[pc.Key] = u.devices
		}
		delete(m.uses, pc.Key)
	}
	return p
}

// sharedUse reports whether a placed pod counts as a user of a shared
// claim in the plan: per-pod claims are nobody else's, and a pod already
// among a claim's reservations (a bound pod) is counted by reservedFor.
func sharedUse(pc *PodClaim) bool { return !pc.PerPod && !pc.Reserved }

// hold adds (sign 1) or releases (-1) devices the plan allocated on node
// n, as option o for a planned node whose instance type is open.
func (m *Model[N, O]) hold(n N, o O, ids []structured.DeviceID, sign int) {
	k := site[N, O]{n, o}
	delete(m.heldKeys, k)
	set := m.planned[k]
	if set == nil {
		set = sets.New[structured.DeviceID]()
		m.planned[k] = set
	}
	for _, id := range ids {
		if sign > 0 {
			set.Insert(id)
		} else {
			set.Delete(id)
		}
	}
}

// ClaimNode returns the node the plan allocates a shared claim on, the
// zero N when no placed pod uses it yet.
func (m *Model[N, O]) ClaimNode(k ClaimKey) N {
	if u := m.uses[k]; u != nil {
		return u.node
	}
	var none N
	return none
}

// ClaimUsers returns how many placed pods of the plan use a shared claim.
func (m *Model[N, O]) ClaimUsers(k ClaimKey) int {
	if u := m.uses[k]; u != nil {
		return u.pods
	}
	return 0
}

// reservations is how many consumers a shared claim has: its reservedFor
// entries plus the pods of the plan that use it (a PodGroup takes one).
func (m *Model[N, O]) reservations(pc *PodClaim) int {
	users := m.ClaimUsers(pc.Key)
	if pc.PodGroup != "" {
		return pc.Reservations + min(users, 1)
	}
	return pc.Reservations + users
}
