package snapshot

import (
	"fmt"
	"maps"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// DeviceVerdict is the answer of CheckDevices.
type DeviceVerdict int

const (
	// DevicesFit means every claim of the pod can be allocated on the
	// node (or already is, there).
	DevicesFit DeviceVerdict = iota
	// ClaimsPending means the pod waits for a claim that does not exist
	// (or is being deleted): the scheduler does not schedule it.
	ClaimsPending
	// ClaimElsewhere means a claim is allocated (in the cluster or by the
	// plan) on devices another node has.
	ClaimElsewhere
	// ClaimFull means a shared claim already has the maximum number of
	// reservations (256) and cannot take this pod.
	ClaimFull
	// DevicesShort means the node's devices cannot satisfy the claims.
	DevicesShort
	// ClaimInvalid means the claim or its class cannot be evaluated (a
	// CEL error, a missing DeviceClass).
	ClaimInvalid
)

// CheckDevices answers whether the pods of class c can get their claims
// on node n, given what the cluster has allocated and what the plan
// allocated there for the pods placed before, as kube-scheduler allocates
// one pod's claims at a time. On a planned node whose instance type is not
// chosen yet, it suffices that one option that still fits the node's pods
// and this one has the devices. The string says why not.
//
// Complexity: one allocator run per option tried (small: the slices of
// one node); for a template the answer is cached per class and option.
func (s *Snapshot) CheckDevices(c *Class, n *Node) (DeviceVerdict, string) {
	d := s.deviceCheck(c, n, false)
	return d.verdict, d.why
}

// OptionHasDevices reports whether a pod of class c can get its devices
// on node n (a template or a planned node) launched as option o.
func (s *Snapshot) OptionHasDevices(n *Node, o *Option, c *Class) bool {
	if len(c.Claims) == 0 {
		return true
	}
	if d := s.dra.check; d != nil && d.c == c && d.n == n && d.gen == s.dra.gen && d.full {
		return d.fits(o)
	}
	k := optionCheck{c, n, o}
	if s.dra.optionChecks == nil || s.dra.optionChecksGen != s.dra.gen {
		s.dra.optionChecks, s.dra.optionChecksGen = map[optionCheck]bool{}, s.dra.gen
	}
	if v, ok := s.dra.optionChecks[k]; ok {
		return v
	}
	d := &deviceCheck{c: c, n: n, gen: s.dra.gen, only: o}
	s.fillCheck(d)
	v := d.fits(o)
	s.dra.optionChecks[k] = v
	return v
}

// optionCheck keys OptionHasDevices answers while nothing changes.
type optionCheck struct {
	c *Class
	n *Node
	o *Option
}

// deviceCheck is the DRA answer for a class on a node and, for the
// options that fit (nil key on a node without options), the devices the
// pod's claims get there.
type deviceCheck struct {
	c    *Class
	n    *Node
	gen  int
	full bool
	// only, when set, limits the check to one option.
	only    *Option
	verdict DeviceVerdict
	why     string
	// ok is nil when the pod allocates nothing (its claims are allocated
	// already, or pinned to this node by the plan).
	ok     map[*Option]bool
	perPod map[*Option][]structured.DeviceID
	shared map[ClaimKey]map[*Option][]structured.DeviceID
}

func (d *deviceCheck) fits(o *Option) bool {
	return d.verdict == DevicesFit && (d.ok == nil || d.ok[o])
}

// record is what placing the pod allocates.
func (d *deviceCheck) record() *podDevices {
	if d.verdict != DevicesFit || d.ok == nil {
		return nil
	}
	return &podDevices{perPod: d.perPod, shared: d.shared}
}

// toAllocate is one claim a pod allocates: its own, or a shared one it is
// the first user of.
type toAllocate struct {
	index int // in Class.Claims
	claim *resourcev1.ResourceClaim
	key   *ClaimKey // nil for a per-pod claim
}

// deviceCheck computes (or returns from the one-entry cache) the answer for
// c on n; full asks for every option's devices, not just the first that
// fits.
func (s *Snapshot) deviceCheck(c *Class, n *Node, full bool) *deviceCheck {
	if d := s.dra.check; d != nil && d.c == c && d.n == n && d.gen == s.dra.gen && (d.full || !full) {
		return d
	}
	d := &deviceCheck{c: c, n: n, gen: s.dra.gen, full: full}
	s.dra.check = d
	s.fillCheck(d)
	return d
}

// fillCheck computes d.
func (s *Snapshot) fillCheck(d *deviceCheck) {
	c, n := d.c, d.n
	if c.ClaimWait != "" {
		d.verdict, d.why = ClaimsPending, c.ClaimWait
		return
	}
	var todo []toAllocate
	for i := range c.Claims {
		pc := &c.Claims[i]
		if !pc.PerPod && !pc.Reserved && s.reservations(pc) >= resourcev1.ResourceClaimReservedForMaxSize {
			d.verdict, d.why = ClaimFull, fmt.Sprintf("resourceclaim %s is reserved for %d consumers, the maximum (resourceclaim in use)",
				pc.Key, resourcev1.ResourceClaimReservedForMaxSize)
			return
		}
		switch {
		case pc.Allocated:
			if pc.AvailableOn != nil && !pc.AvailableOn.Match(n.Node) {
				d.verdict, d.why = ClaimElsewhere, fmt.Sprintf("resourceclaim %s is allocated on devices of another node", pc.Key)
				return
			}
		case pc.PerPod:
			todo = append(todo, toAllocate{index: i, claim: pc.Claim})
		default:
			if u := s.dra.uses[pc.Key]; u != nil {
				if u.node != n {
					d.verdict, d.why = ClaimElsewhere, fmt.Sprintf("resourceclaim %s is allocated on devices of %s in this plan", pc.Key, u.node.Name)
					return
				}
			} else {
				todo = append(todo, toAllocate{index: i, claim: pc.Claim, key: &pc.Key})
			}
		}
	}
	if len(todo) == 0 {
		return
	}
	s.allocateOptions(d, todo)
}

// allocateOptions runs the allocator for the claims on the node (each of
// its options that fits the node's pods and this one) and fills d.
func (s *Snapshot) allocateOptions(d *deviceCheck, todo []toAllocate) {
	n, c := d.n, d.c
	claims := make([]*resourcev1.ResourceClaim, len(todo))
	var mask uint64
	for i, t := range todo {
		claims[i] = t.claim
		mask |= 1 << (t.index % 64)
	}
	d.ok = map[*Option]bool{}
	var firstErr error
	try := func(o *Option) bool {
		if n.Template {
			ok, err := s.templateFits(o, c, mask, claims)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			d.ok[o] = ok
			return ok
		}
		res, err := s.allocateOn(n, o, claims)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if res == nil {
			return false
		}
		d.ok[o] = true
		d.keep(o, todo, res)
		return true
	}
	if n.Flex == nil {
		try(nil)
	} else {
		h := s.LimitRoom(n.NodeGroup, &n.Capacity)
		for _, o := range n.Flex.Options {
			if d.only != nil && o != d.only {
				continue
			}
			if !n.Template && (!n.FitsOption(o, &c.Requests) || !h.Allows(&o.Allocatable)) {
				continue
			}
			// An option whose devices cannot take even one such pod
			// takes none on a node where the plan holds some of them.
			if !n.Template {
				if ok, err := s.templateFits(o, c, mask, claims); !ok && err == nil {
					continue
				}
			}
			if try(o) && !d.full {
				break
			}
		}
	}
	switch {
	case len(d.ok) > 0 && slices.ContainsFunc(slices.Collect(maps.Values(d.ok)), func(b bool) bool { return b }):
		d.verdict = DevicesFit
	case firstErr != nil:
		d.verdict, d.why = ClaimInvalid, firstErr.Error()
	default:
		d.verdict, d.why = DevicesShort, describeClaims(claims)
	}
}

// keep records the devices an allocation result gives each claim.
func (d *deviceCheck) keep(o *Option, todo []toAllocate, res []resourcev1.AllocationResult) {
	for i, t := range todo {
		ids := deviceIDs(&res[i])
		if t.key == nil {
			if d.perPod == nil {
				d.perPod = map[*Option][]structured.DeviceID{}
			}
			d.perPod[o] = append(d.perPod[o], ids...)
			continue
		}
		if d.shared == nil {
			d.shared = map[ClaimKey]map[*Option][]structured.DeviceID{}
		}
		if d.shared[*t.key] == nil {
			d.shared[*t.key] = map[*Option][]structured.DeviceID{}
		}
		d.shared[*t.key][o] = ids
	}
}

// reservations is how many consumers a shared claim has: its reservedFor
// entries plus the pods of the plan that use it (a PodGroup takes one).
func (s *Snapshot) reservations(pc *PodClaim) int {
	users := s.ClaimUsers(pc.Key)
	if pc.PodGroup != "" {
		return pc.Reservations + min(users, 1)
	}
	return pc.Reservations + users
}

type optionClass struct {
	o     *Option
	class int
	// mask says which of the class's claims are allocated (bit i for
	// Claims[i]); DeviceUnits uses 0.
	mask uint64
}

// templateFits runs the allocator on an option's devices alone (nothing of
// the plan is allocated on a template), cached per option and class.
func (s *Snapshot) templateFits(o *Option, c *Class, mask uint64, claims []*resourcev1.ResourceClaim) (bool, error) {
	key := optionClass{o, c.ID, mask}
	if v, ok := s.dra.optionCache[key]; ok {
		return v, nil
	}
	res, err := s.runAllocator(o.Node, s.optionSlices(o), s.realAllocated(o.Slices), claims)
	if err == nil {
		s.dra.optionCache[key] = res != nil
	}
	return res != nil, err
}

// allocateOn allocates claims on node n (as option o when o is set),
// given what the cluster and the plan hold there. nil means they do not
// fit.
func (s *Snapshot) allocateOn(n *Node, o *Option, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	node, pool := n.Node, s.slicesOf(n)
	if o != nil {
		node, pool = o.Node, s.optionSlices(o)
	}
	held := s.realAllocated(pool)
	if planned := s.dra.planned[devKey{n, o}]; planned.Len() > 0 {
		held = held.Union(planned)
	}
	return s.runAllocator(node, pool, held, claims)
}
