package predicates

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// NodeResourcesFit checks cpu, memory, ephemeral-storage, extended
// resources and the pod count against the node's allocatable minus what its
// pods request. Requests follow kube-scheduler: init containers by the max
// rule, sidecars (restartable init containers) added, pod overhead added,
// pod-level resources when set. On a planned node whose instance type is
// not chosen yet, the pod fits if the node's pods plus this one fit at
// least one remaining option (with its DaemonSet overhead) that the pod's
// node selection allows: the option it will narrow the node to.
type NodeResourcesFit struct{}

var _ Filter = NodeResourcesFit{}

// ReasonTooManyPods is kube-scheduler's reason for a full pod count.
const ReasonTooManyPods = "Too many pods"

// Name returns the filter name.
func (NodeResourcesFit) Name() string { return "NodeResourcesFit" }

// Filter fails nodes without room for the pod.
func (NodeResourcesFit) Filter(s *snapshot.Snapshot, c *snapshot.Class, n *snapshot.Node) Status {
	if n.PodCount()+c.PodsOn(n) > n.AllowedPods {
		return fail(Unresolvable, ReasonTooManyPods, fmt.Sprintf("too many pods (%d allowed)", n.AllowedPods))
	}
	req := c.RequestsOn(n)
	if !req.IsZero() && !snapshot.Fits(req, &n.Requested, &n.Allocatable) {
		return insufficient(req, n)
	}
	// A pod that requests nothing still narrows a planned node to the
	// options its node selection allows: one option must hold the node's
	// pods with it and match (its selection and its pod count, each
	// checked on its own by the other filters, may have no option in
	// common), or the node is left with none and its pods with no node.
	if n.Flex != nil && !n.Template && !s.FitsAnyOption(n, c) {
		return fail(Unresolvable, "Insufficient resources", "no single instance type fits the node's pods together with this one within the limits and the pod's node selection")
	}
	return OK
}

func insufficient(req *snapshot.Resources, n *snapshot.Node) Status {
	short := snapshot.Shortfalls(req, &n.Requested, &n.Allocatable)
	return Status{Code: Unresolvable, Reason: insufficientReason(firstResource(short)), short: &shortfall{resources: short, max: n.Flex != nil || n.Template}}
}

// insufficientReason is kube-scheduler's reason for a resource the node
// lacks, without an allocation for the common ones.
func insufficientReason(r corev1.ResourceName) string {
	switch r {
	case corev1.ResourceCPU:
		return "Insufficient cpu"
	case corev1.ResourceMemory:
		return "Insufficient memory"
	case corev1.ResourceEphemeralStorage:
		return "Insufficient ephemeral-storage"
	}
	return "Insufficient " + string(r)
}

// String is the detail of an insufficient-resources failure, e.g.
// "insufficient cpu (needs 3, free 2)".
func (s *shortfall) String() string {
	parts := make([]string, 0, len(s.resources))
	for _, r := range s.resources {
		what := "free"
		if s.max {
			what = "max"
		}
		parts = append(parts, fmt.Sprintf("insufficient %s (needs %s, %s %s)", r.Resource,
			snapshot.FormatQuantity(r.Resource, r.Requested), what, snapshot.FormatQuantity(r.Resource, max(r.Free, 0))))
	}
	return strings.Join(parts, ", ")
}

func firstResource(s []snapshot.Shortfall) corev1.ResourceName {
	if len(s) == 0 {
		return "resources"
	}
	return s[0].Resource
}
