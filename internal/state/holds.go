package state

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// HoldReason says why scale-down holds a node group.
type HoldReason string

// Why a node group holds its removals.
const (
	// HoldLaunching: berth launched a node of the group for a waiting pod
	// and the pod is not bound yet.
	HoldLaunching HoldReason = "Launching"
	// HoldLaunchFailed: a launch in the group for a waiting pod failed and
	// the pod still waits (Ocean's "scale down has been disabled in the
	// group until the pod is scheduled"), for up to the store's limit
	// from the first failure.
	HoldLaunchFailed HoldReason = "LaunchFailed"
)

// Hold is why scale-down starts no new removal in a node group: the pod
// berth is bringing capacity for there.
type Hold struct {
	Pod     types.NamespacedName
	Reason  HoldReason
	Message string
}

// Holds are the node groups in which scale-down starts no new removal
// while berth brings capacity there for a pod that waits. Only such pods
// hold removals back, and only in their groups: a pod that no group can
// host holds nothing, and a pod whose launches keep failing holds its
// group only for the store's limit from its first failure there (a pod
// no offering can take would otherwise keep the group's idle nodes for as
// long as it waits). The provisioner publishes the holds after each
// round; the disruption controller and NodeGroup status read them. Safe
// for concurrent use.
type Holds struct {
	mu sync.Mutex
	// published is set once the provisioner has published a round: until
	// then (a new leader) nothing is known and every group is held.
	published bool
	byGroup   map[string]Hold
	// failed remembers, per waiting pod, the groups where a launch for it
	// failed: the first failure's time and the last one's message.
	failed map[types.NamespacedName]map[string]launchFailure
	// clock tells the time of failures; limit is how long after the first
	// failure of a pod in a group the hold lasts (0: while the pod waits).
	clock clock.PassiveClock
	limit time.Duration
	// OnChange, if set, is called (outside the lock) with every node group
	// whose hold began, ended or changed.
	OnChange func(nodeGroup string)
}

// launchFailure is when launches for a pod in a group first failed, and
// why the last one did.
type launchFailure struct {
	first   time.Time
	message string
}

// NewHolds returns a store that holds every group until the first
// Publish, and a group where a launch failed while the pod waits.
func NewHolds() *Holds { return NewHoldsFor(clock.RealClock{}, 0) }

// NewHoldsFor returns a store whose launch failures hold their group for
// at most limit from a pod's first failure there (0: while it waits).
func NewHoldsFor(clk clock.PassiveClock, limit time.Duration) *Holds {
	return &Holds{byGroup: map[string]Hold{}, failed: map[types.NamespacedName]map[string]launchFailure{}, clock: clk, limit: limit}
}

// LaunchFailed records that launching a node of the group for the pod
// failed. The hold lasts while the pod waits, up to the store's limit
// from the pod's first failure in the group (see Publish).
func (h *Holds) LaunchFailed(pod types.NamespacedName, nodeGroup, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed[pod] == nil {
		h.failed[pod] = map[string]launchFailure{}
	}
	f, ok := h.failed[pod][nodeGroup]
	if !ok {
		f.first = h.clock.Now()
	}
	f.message = message
	h.failed[pod][nodeGroup] = f
}

// Publish replaces the holds with what the provisioner's round found:
// waiting are the pods that still wait for capacity, launching maps those
// berth nominated to a node it launched to that node's group. Launch
// failures of pods that no longer wait are forgotten.
func (h *Holds) Publish(waiting map[types.NamespacedName]bool, launching map[types.NamespacedName]string) {
	h.mu.Lock()
	next := map[string]Hold{}
	for pod := range h.failed {
		if !waiting[pod] {
			delete(h.failed, pod)
		}
	}
	// Sorted, so that the pod a hold names does not change from round to
	// round while several hold the same group.
	for _, pod := range slices.SortedFunc(maps.Keys(h.failed), compareNames) {
		for _, g := range slices.Sorted(maps.Keys(h.failed[pod])) {
			f := h.failed[pod][g]
			if _, ok := next[g]; ok || h.limit > 0 && h.clock.Since(f.first) >= h.limit {
				continue
			}
			until := "until the pod is scheduled"
			if h.limit > 0 {
				until += " or until " + f.first.Add(h.limit).UTC().Format(time.RFC3339)
			}
			next[g] = Hold{Pod: pod, Reason: HoldLaunchFailed,
				Message: "a launch for pending pod " + pod.String() + " failed (" + f.message + "); no removal starts in this group " + until}
		}
	}
	for _, pod := range slices.SortedFunc(maps.Keys(launching), compareNames) {
		g := launching[pod]
		if _, ok := next[g]; !ok && waiting[pod] {
			next[g] = Hold{Pod: pod, Reason: HoldLaunching,
				Message: "berth launched a node of this group for pending pod " + pod.String() + "; no removal starts in this group until the pod is bound"}
		}
	}
	changed := map[string]bool{}
	for g, hold := range next {
		if h.byGroup[g] != hold {
			changed[g] = true
		}
	}
	for g := range h.byGroup {
		if _, ok := next[g]; !ok {
			changed[g] = true
		}
	}
	if !h.published {
		for g := range next {
			changed[g] = true
		}
	}
	h.byGroup, h.published = next, true
	h.mu.Unlock()
	if h.OnChange != nil {
		for _, g := range slices.Sorted(maps.Keys(changed)) {
			h.OnChange(g)
		}
	}
}

// Published reports whether the provisioner has published a round since
// this process started: before that, no group's holds are known.
func (h *Holds) Published() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.published
}

// Of returns the hold of a node group, if any.
func (h *Holds) Of(nodeGroup string) (Hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hold, ok := h.byGroup[nodeGroup]
	return hold, ok
}

// All returns every current hold by node group.
func (h *Holds) All() map[string]Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.byGroup)
}

func compareNames(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
