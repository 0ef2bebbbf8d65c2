// Package lifecycle says, for a node of berth's, whether its life calls
// for a disruption other than scale-down: the cloud takes it back
// (Interrupted), its group no longer describes it (Drifted), it is older
// than the group's expireAfter (Expired), or it stays unhealthy (Unhealthy,
// opt-in repair). The disruption itself goes through scale-down's one path
// (replacement first, taint, Eviction API, budgets); this package only
// tells why. Pure: API values and a time in, a verdict out.
package lifecycle

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// Default interruption signals: the taints that the common termination
// handlers and clouds put on a node that is about to go.
var (
	// DefaultInterruptionTaints are the notices of a node going.
	DefaultInterruptionTaints = []string{
		"aws-node-termination-handler/spot-itn",
		"aws-node-termination-handler/scheduled-maintenance",
		"aws-node-termination-handler/asg-lifecycle-termination",
		"cloud.google.com/impending-node-termination",
		TaintShutdown,
		v1alpha1.TaintInterruption,
	}
	// RebalanceTaints are the earlier, softer signals acted on only with
	// spec.disruption.interruption.rebalance.
	RebalanceTaints = []string{"aws-node-termination-handler/rebalance-recommendation"}
)

// DefaultNoticePeriod is how long after a notice a node goes when the
// signal does not say.
const DefaultNoticePeriod = 2 * time.Minute

// DefaultMaintenanceNoticePeriod is DefaultNoticePeriod for a maintenance
// notice (MaintenanceTaints), when the group sets no noticePeriod: a
// scheduled maintenance is announced days ahead and an Auto Scaling
// group's lifecycle hook waits an hour by default, so the node is drained
// within its PodDisruptionBudgets for that long before it is removed
// with what is left (Karpenter drains on such a notice and never forces
// it); with 2 minutes, a pod a budget protected went with the node.
const DefaultMaintenanceNoticePeriod = time.Hour

// TaintShutdown is the taint the cloud controller manager puts on a node
// whose instance is shut down (stopped): its pods do not run, and the
// node is drained and removed as on a notice (Karpenter drains a node
// whose instance stopped).
const TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"

// DefaultRepairToleration is how long a node may be NotReady (False or
// Unknown) before repair replaces it, when the group lists no conditions.
const DefaultRepairToleration = 10 * time.Minute

// DefaultMaxUnhealthyPercent is the share of a group that may be unhealthy
// at once for repair to act: above it, repair does nothing (a partition is
// not a repair).
const DefaultMaxUnhealthyPercent = 20

// Verdict is why a node's life calls for its disruption, if it does.
type Verdict struct {
	Reason v1alpha1.DisruptionReason
	// Deadline is when the node goes whatever berth does (Interrupted);
	// zero otherwise.
	Deadline time.Time
	// Message says why, for a user.
	Message string
	// Signal is the taint key or condition type of an interruption notice.
	Signal string
}

// Verdicts returns why the node must go, in the order its reasons are
// acted on, or none: an interruption notice alone (the cloud does not
// wait, whatever else holds), else repair (unless the group holds its
// repairs: RepairHold), a rebalance recommendation, drift and expiry. A
// node held by the budget of its first reason may go for the next (a
// freeze of drift replacements does not stop expiry). maxProvision is
// the controller's --max-provision-time (Unhealthy).
func Verdicts(ng *v1alpha1.NodeGroup, n *corev1.Node, now time.Time, maxProvision time.Duration, repairHeld bool) []*Verdict {
	if v := Interrupted(ng, n, now); v != nil {
		return []*Verdict{v}
	}
	var out []*Verdict
	if v := Unhealthy(ng, n, now, maxProvision); v != nil && !repairHeld {
		out = append(out, v)
	}
	for _, v := range []*Verdict{Rebalance(ng, n), Drifted(ng, n), Expired(ng, n, now)} {
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

// MaintenanceTaints are the interruption notices that take the machine,
// not the capacity: a replacement of the same offering is as good
// (scheduled maintenance, an Auto Scaling group's own termination).
var MaintenanceTaints = []string{
	"aws-node-termination-handler/scheduled-maintenance",
	"aws-node-termination-handler/asg-lifecycle-termination",
}

// Interrupted reports an interruption notice on the node: a taint or
// condition of the group's signals (DefaultInterruptionTaints unless it
// lists its own).
func Interrupted(ng *v1alpha1.NodeGroup, n *corev1.Node, now time.Time) *Verdict {
	cfg := ng.Spec.Disruption.Interruption
	taints, conditions := DefaultInterruptionTaints, []string(nil)
	notice := DefaultNoticePeriod
	if cfg != nil {
		if len(cfg.Taints) > 0 {
			taints = cfg.Taints
		}
		conditions = cfg.Conditions
		if cfg.NoticePeriod != nil && cfg.NoticePeriod.Duration > 0 {
			notice = cfg.NoticePeriod.Duration
		}
	}
	// Of several notices, the one that takes the node soonest: a spot
	// notice beside a maintenance notice keeps its 2 minutes (and its
	// offering avoided).
	signal, kind := "", ""
	for _, t := range n.Spec.Taints {
		if slices.Contains(taints, t.Key) && (signal == "" || slices.Contains(MaintenanceTaints, signal)) {
			signal, kind = t.Key, "taint"
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(conditions, string(c.Type)) && (signal == "" || slices.Contains(MaintenanceTaints, signal)) {
			signal, kind = string(c.Type), "condition"
		}
	}
	if signal == "" {
		return nil
	}
	if slices.Contains(MaintenanceTaints, signal) && (cfg == nil || cfg.NoticePeriod == nil || cfg.NoticePeriod.Duration <= 0) {
		notice = DefaultMaintenanceNoticePeriod
	}
	deadline := now.Add(notice)
	if at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationInterruptionDeadline]); err == nil {
		deadline = at
	} else if started, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationDisruptionStarted]); err == nil &&
		n.Annotations[v1alpha1.AnnotationDisruptionReason] == string(v1alpha1.ReasonInterrupted) {
		deadline = started.Add(notice) // the notice as berth first acted on it
	}
	return &Verdict{Reason: v1alpha1.ReasonInterrupted, Deadline: deadline, Signal: signal,
		Message: fmt.Sprintf("interruption notice (%s %s): the node goes at %s", kind, signal, deadline.UTC().Format(time.RFC3339))}
}

// TakesCapacity reports whether an interruption takes its node's
// capacity away, so that its offering is avoided for a while: a spot
// node's notice, but a maintenance notice (MaintenanceTaints). An
// on-demand node's capacity stays to be bought again.
func TakesCapacity(n *corev1.Node, v *Verdict) bool {
	return v != nil && v.Reason == v1alpha1.ReasonInterrupted && n.Labels[v1alpha1.LabelCapacityType] == string(v1alpha1.CapacityTypeSpot) &&
		!slices.Contains(MaintenanceTaints, v.Signal)
}

// Rebalance reports a rebalance recommendation on the node when the group
// acts on them (spec.disruption.interruption.rebalance): the node is
// replaced ahead of an interruption, as drift, within its budget.
func Rebalance(ng *v1alpha1.NodeGroup, n *corev1.Node) *Verdict {
	if cfg := ng.Spec.Disruption.Interruption; cfg == nil || !cfg.Rebalance {
		return nil
	}
	for _, t := range n.Spec.Taints {
		if slices.Contains(RebalanceTaints, t.Key) {
			return &Verdict{Reason: v1alpha1.ReasonDrifted, Message: "rebalance recommendation (taint " + t.Key + "): replaced ahead of an interruption"}
		}
	}
	return nil
}

// Drifted reports a node its group no longer describes: the launch hash
// it carries differs from the group's, or its offering (instance type,
// zone, capacity type) left the group. A node launched before berth wrote
// launch hashes carries none, and one without an instance type label says
// nothing of its offering: neither has drifted for that. Nor has a Cluster
// API group's node for its offering: its MachineDeployment, not berth,
// chooses the machine and the zone (the cloud's labels say what it chose),
// so a replacement would be bought the same way and drift again; a change
// of the Cluster API object changes the launch hash.
func Drifted(ng *v1alpha1.NodeGroup, n *corev1.Node) *Verdict {
	l := n.Labels
	if l[v1alpha1.LabelInstanceType] == "" {
		return nil // berth does not know what the node was bought as
	}
	if ng.Spec.Provider.ClusterAPI != nil {
		return launchHashDrift(ng, n)
	}
	if it, o := ng.FindOffering(l[v1alpha1.LabelInstanceType], l[v1alpha1.LabelZone], v1alpha1.CapacityType(l[v1alpha1.LabelCapacityType])); it == nil || o == nil {
		return &Verdict{Reason: v1alpha1.ReasonDrifted, Message: fmt.Sprintf("its offering %s/%s/%s is no longer one of node group %s's",
			l[v1alpha1.LabelInstanceType], l[v1alpha1.LabelZone], l[v1alpha1.LabelCapacityType], ng.Name)}
	}
	return launchHashDrift(ng, n)
}

// launchHashDrift reports a node whose launch hash differs from its group's.
func launchHashDrift(ng *v1alpha1.NodeGroup, n *corev1.Node) *Verdict {
	if h := n.Annotations[v1alpha1.AnnotationLaunchHash]; h != "" && !ng.MatchesLaunchHash(h) {
		what := "template (labels, taints) or provider"
		if ng.Spec.Provider.ClusterAPI != nil {
			what = "template labels or Cluster API object"
		}
		return &Verdict{Reason: v1alpha1.ReasonDrifted, Message: "node group " + ng.Name + "'s " + what + " changed since the node was launched"}
	}
	return nil
}

// Expired reports a node older than the group's expireAfter, plus a
// delay of its own (a hash of its name over a tenth of expireAfter, at
// most an hour), so that nodes launched together expire apart. A node
// without a creation time (one written by hand in a `berth plan` file)
// has no known age and does not expire.
func Expired(ng *v1alpha1.NodeGroup, n *corev1.Node, now time.Time) *Verdict {
	ea := ng.Spec.Disruption.ExpireAfter
	if ea == nil || ea.Duration <= 0 || n.CreationTimestamp.IsZero() {
		return nil
	}
	wait := ea.Duration + Spread(n.Name, ea.Duration)
	if wait < ea.Duration {
		return nil // past what a Duration holds (292 years): never
	}
	if now.Before(n.CreationTimestamp.Add(wait)) {
		return nil
	}
	return &Verdict{Reason: v1alpha1.ReasonExpired, Message: fmt.Sprintf("the node is older than node group %s's expireAfter %s (launched %s)",
		ng.Name, ea.Duration, n.CreationTimestamp.UTC().Format(time.RFC3339))}
}

// Spread is a node's own delay past expireAfter: in [0, min(expireAfter/10,
// 1h)), from a hash of its name.
func Spread(name string, expireAfter time.Duration) time.Duration {
	window := min(expireAfter/10, time.Hour)
	if window <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return time.Duration(h.Sum64() % uint64(window))
}

// Unhealthy reports a node whose repair conditions have held for their
// toleration (repair on), or nil. A node never up (UpOnce, maxProvision
// the controller's --max-provision-time) is not: whether it boots in time
// is the launch timeout's to say, after the max provision time.
func Unhealthy(ng *v1alpha1.NodeGroup, n *corev1.Node, now time.Time, maxProvision time.Duration) *Verdict {
	want, c := failing(ng, n, maxProvision)
	if c == nil || now.Sub(c.LastTransitionTime.Time) < want.Toleration.Duration {
		return nil
	}
	return &Verdict{Reason: v1alpha1.ReasonUnhealthy, Message: fmt.Sprintf("condition %s has been %s since %s (tolerated %s)",
		want.Type, want.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), want.Toleration.Duration)}
}

// failing returns the repair condition an initialized node fails now, for
// however long, and the node's condition that matches it; nil without
// repair or when none matches. Of several, the one failed longest.
func failing(ng *v1alpha1.NodeGroup, n *corev1.Node, maxProvision time.Duration) (v1alpha1.RepairCondition, *corev1.NodeCondition) {
	r := ng.Spec.Disruption.Repair
	if r == nil || !UpOnce(n, maxProvision) {
		return v1alpha1.RepairCondition{}, nil
	}
	conds := r.Conditions
	if len(conds) == 0 {
		tol := metav1Duration(DefaultRepairToleration)
		conds = []v1alpha1.RepairCondition{{Type: string(corev1.NodeReady), Status: string(corev1.ConditionFalse), Toleration: tol},
			{Type: string(corev1.NodeReady), Status: string(corev1.ConditionUnknown), Toleration: tol}}
	}
	var (
		found   v1alpha1.RepairCondition
		matched *corev1.NodeCondition
		overdue time.Time // when the found condition reaches its toleration
	)
	for _, want := range conds {
		for i := range n.Status.Conditions {
			c := &n.Status.Conditions[i]
			if string(c.Type) != want.Type || string(c.Status) != want.Status || c.LastTransitionTime.IsZero() {
				continue
			}
			if at := c.LastTransitionTime.Add(want.Toleration.Duration); matched == nil || at.Before(overdue) {
				found, matched, overdue = want, c, at
			}
		}
	}
	return found, matched
}

// DefaultMaxProvisionTime is the controller's default
// --max-provision-time: how long a launched node may take to turn Ready.
const DefaultMaxProvisionTime = 15 * time.Minute

// UpOnce reports whether a node has been up: berth saw it Ready
// (berth.dev/initialized), or adopted it when it had lived longer than
// the max provision time (a Cluster API node that ran before berth knew
// it: the launch timeout never takes it). A node adopted younger (the
// Machine of a replica berth added, still booting) is up once berth saw
// it Ready: until then, whether it boots in time is the launch timeout's
// to say. Exactly the nodes not UpOnce are the launch timeout's.
func UpOnce(n *corev1.Node, maxProvision time.Duration) bool {
	return n.Labels[v1alpha1.LabelInitialized] == "true" || AdoptedOld(n, maxProvision)
}

// AdoptedOld reports whether berth adopted the node (a Cluster API
// Machine's node) when it had lived at least maxProvision: it ran before
// berth knew it, and going NotReady now is not a failed launch.
func AdoptedOld(n *corev1.Node, maxProvision time.Duration) bool {
	at, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationAdoptedAt])
	return err == nil && at.Sub(n.CreationTimestamp.Time) >= maxProvision
}

// RepairHold reports whether a group holds its repairs: more of its
// nodes (not suspended standby nodes) fail a repair condition now than
// its maxUnhealthyPercent of those up allows, rounded up (a group of up
// to five nodes may have one repaired at the default 20 %), counting every node
// that fails one however short a time (a partition takes nodes down
// together, and each reaches its toleration in its own time: a partition
// is not a repair). It returns how many fail and how many may.
func RepairHold(ng *v1alpha1.NodeGroup, nodes []*corev1.Node, maxProvision time.Duration) (held bool, failingNow, allowed int) {
	if ng.Spec.Disruption.Repair == nil {
		return false, 0, 0
	}
	up := 0
	for _, n := range nodes {
		if !UpOnce(n, maxProvision) {
			continue // booting: neither unhealthy nor one of those the share is of
		}
		up++
		if _, c := failing(ng, n, maxProvision); c != nil {
			failingNow++
		}
	}
	allowed = (int(maxUnhealthy(ng))*up + 99) / 100
	return failingNow > allowed, failingNow, allowed
}

// ClusterRepairHold reports whether every group holds its repairs: more
// of the nodes of the groups that repair (those that have been up,
// UpOnce; suspended standby nodes and nodes being deleted aside) fail a
// repair condition now, however briefly, than DefaultMaxUnhealthyPercent
// of them, rounded up (a group that does not repair holds no other back). A control plane that
// loses its nodes (a load balancer or DNS outage between the kubelets and
// the API server) marks every node Unknown: a group of one node would
// repair its node by its own share (one of one), replacing nodes whose
// workloads run. It returns how many are not Ready and how many may be.
func ClusterRepairHold(groups map[string]*v1alpha1.NodeGroup, nodes []*corev1.Node, maxProvision time.Duration) (held bool, notReady, allowed int) {
	up := 0
	for _, n := range nodes {
		g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
		if g == nil || g.Spec.Disruption.Repair == nil || n.DeletionTimestamp != nil || nodeutil.Standby(n) || !UpOnce(n, maxProvision) {
			continue
		}
		up++
		if _, c := failing(g, n, maxProvision); c != nil {
			notReady++
		}
	}
	allowed = (DefaultMaxUnhealthyPercent*up + 99) / 100
	return notReady > allowed, notReady, allowed
}

func maxUnhealthy(ng *v1alpha1.NodeGroup) int32 {
	if r := ng.Spec.Disruption.Repair; r != nil && r.MaxUnhealthyPercent != nil {
		return *r.MaxUnhealthyPercent
	}
	return DefaultMaxUnhealthyPercent
}

func metav1Duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
