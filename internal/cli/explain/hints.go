package explain

import (
	"strings"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/simulator/predicates"
)

// nodeHints say, per rule that keeps a node (drain rules, scale-down's
// group and node rules, this command's own), what the user can change for
// the node to go. Every drain rule and scale-down reason has one (a test
// checks it).
var nodeHints = map[drain.Reason]string{
	drain.ReasonDoNotDisrupt: `remove the pod's annotation berth.dev/do-not-disrupt (or karpenter.sh/do-not-disrupt, or its label spotinst.io/restrict-scale-down) once it may be moved`,
	drain.ReasonControllerNotFound: `the pod's ReplicaSet, Job, StatefulSet or ReplicationController is gone, so nothing would recreate the pod once evicted ` +
		`(safe-to-evict does not change that): delete the pod yourself if it is no longer needed`,
	drain.ReasonNotSafeToEvict: `the pod is annotated cluster-autoscaler.kubernetes.io/safe-to-evict "false" or "on-completion": remove the annotation (or wait until the pod completes)`,
	drain.ReasonNotReplicated:  `run the pod under a controller (Deployment, StatefulSet, Job), or annotate it cluster-autoscaler.kubernetes.io/safe-to-evict: "true" to allow evicting it`,
	drain.ReasonLocalStorage: `list the pod's local volumes (emptyDir on disk, hostPath) in its annotation ` +
		`cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes (comma-separated) if their data may be lost, or use an in-memory emptyDir`,
	drain.ReasonSystemPodWithoutPDB: `create a PodDisruptionBudget that covers the kube-system pod (it says how many of its pods may be down)`,
	drain.ReasonPDB: `the pod's PodDisruptionBudget allows no disruption now: wait until its pods are healthy again, ` +
		`or relax its minAvailable/maxUnavailable (kubectl get pdb -n NAMESPACE shows ALLOWED DISRUPTIONS)`,
	scaledown.ReasonNodeDoNotDisrupt: `remove the node's opt-out the message names (berth.dev/do-not-disrupt, karpenter.sh/do-not-disrupt, ` +
		`cluster-autoscaler.kubernetes.io/scale-down-disabled, or the label berth.dev/scale-down-disabled)`,
	scaledown.ReasonPolicy:  `set the node group's spec.disruption.consolidationPolicy to WhenEmptyOrUnderutilized`,
	scaledown.ReasonMinSize: `lower the node group's spec.minSize`,
	scaledown.ReasonBudget: `raise the node group's spec.disruption.budget (or the spec.disruption.budgets entry for this reason), ` +
		`or wait until the nodes being disrupted now are gone (nodes of the group that are NotReady count too: bring them back or remove them)`,
	scaledown.ReasonNoHome: `the pod fits on no other node: free room elsewhere (lower requests, scale down other workloads), ` +
		`or relax its node selector, affinity, anti-affinity or topology spread`,
	scaledown.ReasonHeadroom:        `a Headroom or CapacityBuffer unit would fit nowhere without this node: lower the Headroom's or buffer's size if less spare capacity will do`,
	scaledown.ReasonNotOwned:        `berth removes only nodes it launched (or adopted) for the node group: remove this node yourself`,
	scaledown.ReasonNominated:       `a pod not bound yet is nominated to the node: it stays until that pod is bound or its nomination clears`,
	scaledown.ReasonWorkloadClaim:   `the node's devices hold a ResourceClaim reserved for a PodGroup: delete the PodGroup if its pods will not come back`,
	scaledown.ReasonRecentlyGivenUp: "berth gave up draining this node a moment ago: it tries again after a cool-down of " + scaledown.GiveUpCooldown.String(),
	scaledown.ReasonGroupHeld: `berth is bringing capacity to this node group for a pod that waits (condition ScaleDownSuspended): ` +
		`removals start again once that pod runs or its launch stops failing`,
	scaledown.ReasonReplacementHeld: `a cheaper node would replace this one: it is planned once the pods that wait for a node have one ` +
		"(`berth explain pod` for one of them; raise the group's spec.maxSize if they wait at it) and the group is back within its spec.maxSize",
	scaledown.ReasonRepairHeld: `more of the node group's nodes are unhealthy now than it repairs at once (a partition is not a repair): ` +
		`repairs start again once fewer fail, or raise spec.disruption.repair.maxUnhealthyPercent`,
	scaledown.ReasonUnplaceable: `the node's pods fit nowhere else and no node can be launched for them: see ` +
		"`berth explain pod` for one of them, or raise the group's spec.maxSize or limits",
	// Why a node goes: what keeps it instead.
	drain.Reason(v1alpha1.ReasonEmpty): `to keep it: annotate the node berth.dev/do-not-disrupt: "true", or raise the group's spec.minSize`,
	drain.Reason(v1alpha1.ReasonUnderutilized): `to keep it: annotate the node berth.dev/do-not-disrupt: "true", or set the group's ` +
		`spec.disruption.consolidationPolicy to WhenEmpty`,
	drain.Reason(v1alpha1.ReasonDrifted): `the group's spec (template labels or taints, provider, offerings) changed since the node was launched: ` +
		`revert the change to keep it, or hold drift with a spec.disruption.budgets entry {nodes: "0", reasons: [Drifted]}`,
	drain.Reason(v1alpha1.ReasonExpired):   `raise or remove the group's spec.disruption.expireAfter`,
	drain.Reason(v1alpha1.ReasonUnhealthy): `make the node healthy again, or change the group's spec.disruption.repair`,
	drain.Reason(v1alpha1.ReasonInterrupted): `the cloud takes the node back: nothing in berth keeps it; ` +
		`berth moves its pods before the deadline`,
	ReasonNoNodeGroup:      `berth manages only nodes of its NodeGroups (label berth.dev/nodegroup): nothing to change unless you want berth to manage it`,
	ReasonNodeGroupMissing: `the node's NodeGroup does not exist: create it, or remove the node yourself`,
	ReasonNotReady:         `berth removes only Ready nodes it has seen Ready once; a node that stays unhealthy is replaced only with spec.disruption.repair`,
	ReasonReplacement:      `the node was launched to replace others: it stays at least until they are gone`,
}

// nodeHint is the hint for a reason, or "".
func nodeHint(r string) string { return nodeHints[drain.Reason(r)] }

// groupHints say, per reason the scale-up planner gives for a node group
// that cannot host a pod, what the user can change. The planner gives
// kube-scheduler's reason texts (predicates.Reason*) or its own details;
// the first entry whose text the reason contains wins.
var groupHints = []struct{ contains, hint string }{
	{"node group at maxSize", "raise the node group's spec.maxSize"},
	{"--max-nodes-total", "the cluster has as many nodes as the controller's --max-nodes-total allows: raise it, or free nodes"},
	{"--max-nodes-per-round", "nothing to change: the round launched as many nodes as --max-nodes-per-round allows, and the next round plans this pod"},
	{"none of its offerings can be launched for now", "the group's offerings are avoided for a while after failed launches: `kubectl describe nodegroup` shows why (status.conditions LaunchFailing, events); add other offerings to spec.instanceTypes, or wait"},
	{"node group limit on", "raise the node group's spec.limits"},
	{"cluster limit on", "raise the controller's --cluster-max-cpu / --cluster-max-memory"},
	{"limits reached", "raise the node group's spec.limits or the controller's cluster limits"},
	{"no instance type or capacity type matches", "the pod's node selector or affinity asks for an instance type, zone or capacity type the group does not offer: change the pod's selector, or add that offering to the group's spec.instanceTypes"},
	{predicates.ReasonNodeAffinity, "the pod's node selector or affinity asks for labels the group's nodes lack: change the pod's selector, or add the label to the group's spec.template.labels"},
	{"untolerated taint", "add a toleration for the taint to the pod, or remove the taint from the group's spec.template.taints"},
	{predicates.ReasonTaint, "add a toleration for the group's taints to the pod, or remove them from spec.template.taints"},
	{"insufficient", "lower the pod's requests, or add a larger instance type to the group's spec.instanceTypes"},
	{"Insufficient", "lower the pod's requests, or add a larger instance type to the group's spec.instanceTypes"},
	{predicates.ReasonTooManyPods, "add an instance type that allows more pods per node"},
	{predicates.ReasonNodePorts, "the pod's hostPort is taken on every node it could use: drop the hostPort or let the group have more nodes"},
	{predicates.ReasonExistingAntiAffinity, "pods already there repel this one (their anti-affinity): relax their anti-affinity"},
	{predicates.ReasonAntiAffinity, "relax the pod's pod anti-affinity (or its topology key)"},
	{predicates.ReasonAffinity, "the pods the pod's affinity asks for run nowhere this group can reach: relax the pod's pod affinity"},
	{predicates.ReasonSpread, "the group cannot satisfy the pod's topology spread: add offerings in more zones, raise maxSkew, or use whenUnsatisfiable: ScheduleAnyway"},
	{predicates.ReasonVolumeNodeAffinity, "the pod's volume is bound to a zone (or node) the group does not offer: add an offering in that zone"},
	{predicates.ReasonClaimNotAvailable, "the pod's ResourceClaim is allocated elsewhere: free it, or let the pod use a new claim"},
	{predicates.ReasonCannotAllocate, "no instance type of the group has devices that satisfy the pod's ResourceClaims: add one that does (spec.instanceTypes[].devices)"},
	{predicates.ReasonClaimInUse, "the pod's ResourceClaim is in use by other pods: wait for them, or use a claim of its own"},
	{"not together with the other pending pods", "the pod fits alone, but not with the other pods pending now (affinity or spread): it is planned again when they have nodes"},
	{"berth cannot read this pod", "fix the pod's spec as the message says"},
}

// groupHint is the hint for one of the planner's reasons, or "".
func groupHint(reason string) string {
	for _, h := range groupHints {
		if strings.Contains(reason, h.contains) {
			return h.hint
		}
	}
	return ""
}
