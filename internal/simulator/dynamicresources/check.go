package dynamicresources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Verdict is the answer of Check.
type Verdict int

const (
	// DevicesFit means every claim of the pod can be allocated on the
	// node (or already is, there).
	DevicesFit Verdict = iota
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

// Option is one way a planned node may be launched, as the model needs
// it: comparable (the model keys devices and caches by it) and able to say
// what a node launched as it allocates on.
type Option interface {
	comparable
	// Devices returns the node object a node of the option is and the
	// ResourceSlices it publishes.
	Devices() (*corev1.Node, []*resourcev1.ResourceSlice)
}

// Nodes is what the model asks the snapshot about its nodes (New), only
// when an answer is not cached.
type Nodes[N comparable, O Option] interface {
	// Host describes node n.
	Host(n N) Host[O]
	// Fitting appends to buf, in the node's order, the options of a
	// planned node whose instance type is not chosen yet that hold the
	// node's pods plus one pod of the class, within the limits; only
	// option only when it is not the zero O. Asked once per check of such
	// a node (not of a template).
	Fitting(n N, class int, only O, buf []O) []O
}

// Host is what the model needs to know of a node to allocate on it.
type Host[O Option] struct {
	// Node is the node object (its name and labels, for node selectors).
	Node *corev1.Node
	// Expected are the slices the node will publish (from its instance
	// type), used while it has published none.
	Expected []*resourcev1.ResourceSlice
	// Template is true for a node group template: nothing of the plan is
	// allocated on it.
	Template bool
	// Flex is true for a planned node (or a template) whose instance type
	// is not chosen yet; Options are those it may still become.
	Flex    bool
	Options []O
}

// Answer is the model's answer for a class on a node and, for the options
// that fit (the zero O on a node without options), the devices the pod's
// claims get there. It is valid until the next Changed.
type Answer[N comparable, O Option] struct {
	class int
	n     N
	gen   int
	full  bool
	// only, when set, limits the check to one option.
	only    O
	verdict Verdict
	why     string
	// short are the claims that did not fit: why is said from them only
	// when asked (Result), as most answers are never shown.
	short []*resourcev1.ResourceClaim
	// ok is nil when the pod allocates nothing (its claims are allocated
	// already, or pinned to this node by the plan).
	ok     map[O]bool
	perPod map[O][]structured.DeviceID
	shared map[ClaimKey]map[O][]structured.DeviceID
}

// Result is the verdict and, unless the devices fit, why not.
func (d *Answer[N, O]) Result() (Verdict, string) {
	if d.why == "" && d.short != nil {
		d.why = describeClaims(d.short)
	}
	return d.verdict, d.why
}

// Fits reports whether the pod gets its devices on the node launched as
// option o (the zero O on a node without options).
func (d *Answer[N, O]) Fits(o O) bool {
	return d.verdict == DevicesFit && (d.ok == nil || d.ok[o])
}

// Placement is what placing the pod allocates, for Place; nil when it
// allocates nothing.
func (d *Answer[N, O]) Placement() *Placement[O] {
	if d.verdict != DevicesFit || d.ok == nil {
		return nil
	}
	return &Placement[O]{perPod: d.perPod, shared: d.shared}
}

// Check answers whether the pods of r can get their claims on node n,
// given what the cluster has allocated and what the plan allocated there
// for the pods placed before, as kube-scheduler allocates one pod's claims
// at a time. On a planned node whose instance type is not chosen yet, it
// suffices that one option that still fits the node's pods and this one
// has the devices; all asks for the devices of every such option (to
// narrow the node's options when the pod is placed), not just the first.
//
// Complexity: one allocator run per option tried (small: the slices of
// one node); for a template the answer is cached per class and option. The
// last answer is cached until Changed.
func (m *Model[N, O]) Check(r Request, n N, all bool) *Answer[N, O] {
	if d := m.check; d != nil && d.class == r.Class && d.n == n && d.gen == m.gen && (d.full || !all) {
		return d
	}
	d := &Answer[N, O]{class: r.Class, n: n, gen: m.gen, full: all}
	m.check = d
	m.fill(d, r)
	return d
}

// OptionFits reports whether a pod of r can get its devices on node n (a
// template or a planned node) launched as option o.
func (m *Model[N, O]) OptionFits(r Request, n N, o O) bool {
	if len(r.Claims) == 0 {
		return true
	}
	if d := m.check; d != nil && d.class == r.Class && d.n == n && d.gen == m.gen && d.full {
		return d.Fits(o)
	}
	k := optionCheck[N, O]{r.Class, n, o}
	if m.optionChecks == nil || m.optionChecksGen != m.gen {
		m.optionChecks, m.optionChecksGen = map[optionCheck[N, O]]bool{}, m.gen
	}
	if v, ok := m.optionChecks[k]; ok {
		return v
	}
	d := &Answer[N, O]{class: r.Class, n: n, gen: m.gen, only: o}
	m.fill(d, r)
	v := d.Fits(o)
	m.optionChecks[k] = v
	return v
}

// optionCheck keys OptionFits answers while nothing changes.
type optionCheck[N comparable, O Option] struct {
	class int
	n     N
	o     O
}

// toAllocate is one claim a pod allocates: its own, or a shared one it is
// the first user of.
type toAllocate struct {
	index int // in Request.Claims
	claim *resourcev1.ResourceClaim
	key   *ClaimKey // nil for a per-pod claim
}

// fill computes d.
func (m *Model[N, O]) fill(d *Answer[N, O], r Request) {
	if r.Wait != "" {
		d.verdict, d.why = ClaimsPending, r.Wait
		return
	}
	var todo []toAllocate
	for i := range r.Claims {
		pc := &r.Claims[i]
		if !pc.PerPod && !pc.Reserved && m.reservations(pc) >= resourcev1.ResourceClaimReservedForMaxSize {
			d.verdict, d.why = ClaimFull, fmt.Sprintf("resourceclaim %s is reserved for %d consumers, the maximum (resourceclaim in use)",
				pc.Key, resourcev1.ResourceClaimReservedForMaxSize)
			return
		}
		switch {
		case pc.Allocated:
			if pc.AvailableOn != nil {
				if !pc.AvailableOn.Match(m.nodes.Host(d.n).Node) {
					d.verdict, d.why = ClaimElsewhere, fmt.Sprintf("resourceclaim %s is allocated on devices of another node", pc.Key)
					return
				}
			}
		case pc.PerPod:
			todo = append(todo, toAllocate{index: i, claim: pc.Claim})
		default:
			if u := m.uses[pc.Key]; u != nil {
				if u.node != d.n {
					d.verdict, d.why = ClaimElsewhere, fmt.Sprintf("resourceclaim %s is allocated on devices of %s in this plan", pc.Key, m.nodes.Host(u.node).Node.Name)
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
	m.allocateOptions(d, r.Class, todo)
}

// allocateOptions runs the allocator for the claims on the node (each of
// its options that fits the node's pods and this one) and fills d.
func (m *Model[N, O]) allocateOptions(d *Answer[N, O], class int, todo []toAllocate) {
	h := m.nodes.Host(d.n)
	claims := make([]*resourcev1.ResourceClaim, len(todo))
	var mask uint64
	for i, t := range todo {
		claims[i] = t.claim
		mask |= 1 << (t.index % 64)
	}
	key := m.claimsKey(classClaims{class: class, mask: mask}, claims)
	d.ok = map[O]bool{}
	var firstErr error
	fits := false // some option (or the node) takes the claims
	try := func(o O) bool {
		if h.Template {
			ok, err := m.templateFits(o, key, claims)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			d.ok[o] = ok
			fits = fits || ok
			return ok
		}
		res, err := m.allocateOn(&h, d.n, o, key, claims)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if res == nil {
			return false
		}
		d.ok[o] = true
		d.keep(o, todo, res)
		fits = true
		return true
	}
	if !h.Flex {
		var none O
		try(none)
	} else {
		var none O
		opts := h.Options
		if !h.Template {
			m.fitting = m.nodes.Fitting(d.n, class, d.only, m.fitting[:0])
			opts = m.fitting
		}
		for _, o := range opts {
			if d.only != none && o != d.only {
				continue
			}
			// An option whose devices cannot take even one such pod
			// takes none on a node where the plan holds some of them.
			if !h.Template {
				if ok, err := m.templateFits(o, key, claims); !ok && err == nil {
					continue
				}
			}
			if try(o) && !d.full {
				break
			}
		}
	}
	switch {
	case fits:
		d.verdict = DevicesFit
	case firstErr != nil:
		d.verdict, d.why = ClaimInvalid, firstErr.Error()
	default:
		d.verdict, d.short = DevicesShort, claims
	}
}

// keep records the devices an allocation result gives each claim.
func (d *Answer[N, O]) keep(o O, todo []toAllocate, res []resourcev1.AllocationResult) {
	for i, t := range todo {
		ids := deviceIDs(&res[i])
		if t.key == nil {
			if d.perPod == nil {
				d.perPod = map[O][]structured.DeviceID{}
			}
			d.perPod[o] = append(d.perPod[o], ids...)
			continue
		}
		if d.shared == nil {
			d.shared = map[ClaimKey]map[O][]structured.DeviceID{}
		}
		if d.shared[*t.key] == nil {
			d.shared[*t.key] = map[O][]structured.DeviceID{}
		}
		d.shared[*t.key][o] = ids
	}
}
