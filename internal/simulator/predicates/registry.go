// Package predicates holds the simulator's filters, one per file, each with
// kube-scheduler's semantics and the reason text the scheduler uses. A
// filter answers whether pods of a class fit a node of the snapshot; the
// snapshot's counters make each answer independent of the number of pods.
package predicates

import (
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Code says whether a failure can go away while the plan only adds pods.
type Code int

const (
	// Success means the pod fits.
	Success Code = iota
	// Unschedulable failures can pass later in the same plan, once other
	// pods are placed (pod affinity waiting for its peers, spread skew).
	Unschedulable
	// Unresolvable failures stay failures while pods are only added
	// (resources, taints, node affinity, anti-affinity, ports).
	Unresolvable
)

// Status is a filter's answer.
type Status struct {
	Code Code
	// Reason is the scheduler's reason text, e.g. "Insufficient cpu".
	Reason string
	// Detail is a more specific message for users, e.g.
	// "insufficient cpu (needs 3, max 2)"; empty when Reason says it all.
	Detail string
	// Domain is set when the failure holds for every node of one topology
	// domain (a spread constraint whose domain is too full), so that the
	// caller can skip the domain's other nodes.
	Domain Domain
	// Static is set on a failure that depends only on the class and what
	// a node's shape says (snapshot.Node.Shape: labels, the hostname's
	// value aside, and taints): every existing node of the same shape
	// fails the same way, so a caller may skip them all, unless the class
	// names nodes (snapshot.Class.NamesNodes: then a failure may hold for
	// one node of the shape only, and callers must not skip).
	Static bool
	// short, when Detail is empty, is the shortfall a resource failure's
	// detail is written from, only when asked (Message): a scan over
	// many full nodes does not format one for each.
	short *shortfall
}

// shortfall is what an insufficient-resources failure lacks.
type shortfall struct {
	resources []snapshot.Shortfall
	max       bool
}

// Domain is a topology key and value.
type Domain struct{ Key, Value string }

// OK is the status of a pod that fits.
var OK = Status{}

// Failed reports whether the status is a failure.
func (s Status) Failed() bool { return s.Code != Success }

// Message returns Detail, or Reason when there is no detail.
func (s Status) Message() string {
	if s.Detail != "" {
		return s.Detail
	}
	if s.short != nil {
		return s.short.String()
	}
	return s.Reason
}

func fail(code Code, reason, detail string) Status {
	return Status{Code: code, Reason: reason, Detail: detail}
}

// failStatic is fail for a failure that holds for every node of the
// node's shape (Status.Static).
func failStatic(code Code, reason, detail string) Status {
	return Status{Code: code, Reason: reason, Detail: detail, Static: true}
}

// Filter is one scheduling filter.
type Filter interface {
	Name() string
	Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status
}

// Default returns the filters in evaluation order: cheap, static ones
// first; the ones that read counters last.
func Default() []Filter {
	return []Filter{
		NodeName{},
		NodeUnschedulable{},
		TaintToleration{},
		NodeAffinity{},
		VolumeNodeAffinity{},
		VolumeRestrictions{},
		NodeResourcesFit{},
		DynamicResources{},
		NodePorts{},
		InterPodAffinity{},
		PodTopologySpread{},
	}
}

// Run evaluates filters in order and returns the first failure. The class
// must have been prepared (snapshot.Prepare) on this snapshot.
func Run(filters []Filter, s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	for _, f := range filters {
		if passes(f, c) {
			continue
		}
		if st := f.Filter(s, c, n); st.Failed() {
			return st
		}
	}
	return OK
}

// passes reports whether a filter passes every node for the class, as
// its Filter says (a class without a node name, host ports, claims,
// volumes with node affinity or spread constraints), so that Run need not
// call it: a scan of thousands of nodes calls the filters millions of
// times. A type switch on the default filters' types, not an interface
// each implements, so that the check costs less than the call it saves.
func passes(f Filter, c *snapshot.Class) bool {
	switch f.(type) {
	case NodeName:
		return c.NodeName == ""
	case NodePorts:
		return len(c.HostPorts) == 0
	case DynamicResources:
		return c.ClaimWait == "" && len(c.Claims) == 0
	case VolumeNodeAffinity:
		return c.VolumeError == "" && len(c.VolumeAffinity) == 0
	case VolumeRestrictions:
		return len(c.OncePodClaims) == 0
	case PodTopologySpread:
		return len(c.Spread) == 0
	}
	return false
}
