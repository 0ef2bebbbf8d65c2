package v1alpha1

// Well-known names berth reads or writes on ordinary Kubernetes objects. They
// live in one place so that the controller, the planner, the CLI and the docs
// agree on them.
const (
	// LabelNodeGroup is set on every node berth launches to the name of its
	// NodeGroup. The planner uses it to map existing nodes to node groups.
	LabelNodeGroup = "berth.dev/nodegroup"
	// LabelCapacityType is set on every node berth launches to the capacity
	// type of its offering (spot or on-demand). Pods select it to require one.
	LabelCapacityType = "berth.dev/capacity-type"
	// LabelInstanceType is the well-known instance type label.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// LabelZone is the well-known topology zone label.
	LabelZone = "topology.kubernetes.io/zone"
	// LabelRegion is the well-known topology region label.
	LabelRegion = "topology.kubernetes.io/region"
	// LabelHostname is the well-known hostname label, unique per node.
	LabelHostname = "kubernetes.io/hostname"
	// LabelOS is the well-known operating system label.
	LabelOS = "kubernetes.io/os"
	// LabelArch is the well-known architecture label.
	LabelArch = "kubernetes.io/arch"
	// LabelOSBeta and LabelArchBeta are the deprecated labels the kubelet
	// still sets beside LabelOS and LabelArch; LabelInstanceTypeBeta and
	// LabelZoneBeta those the cloud node controller still sets beside
	// LabelInstanceType and LabelZone. Pods written long ago select them.
	LabelOSBeta           = "beta.kubernetes.io/os"
	LabelArchBeta         = "beta.kubernetes.io/arch"
	LabelInstanceTypeBeta = "beta.kubernetes.io/instance-type"
	LabelZoneBeta         = "failure-domain.beta.kubernetes.io/zone"

	// AnnotationLaunchedBy is the owner mark berth writes on every node it
	// launches: the UID of the NodeGroup it was launched for. Berth deletes
	// a node only when this mark matches the NodeGroup named by
	// LabelNodeGroup (a label anyone with node update rights can copy; the
	// UID ties the node to one incarnation of the group), and the
	// ValidatingAdmissionPolicy in config/policy lets only berth's service
	// account set it and berth's account delete only nodes carrying it.
	AnnotationLaunchedBy = "berth.dev/launched-by"
	// LabelInitialized is set to "true" on a berth node the first time
	// berth sees it Ready. The launch timeout applies only to nodes without
	// it: a node that was ever healthy is never deleted for being NotReady
	// (a kubelet restart or a network partition is not a failed launch).
	// It is a label, not memory, so a restarted controller knows it too.
	LabelInitialized = "berth.dev/initialized"

	// AnnotationDoNotDisrupt "true" on a pod or a node keeps berth from
	// removing the node (also honoured: karpenter.sh/do-not-disrupt,
	// cluster-autoscaler.kubernetes.io/safe-to-evict "false" and the label
	// spotinst.io/restrict-scale-down "true").
	AnnotationDoNotDisrupt = "berth.dev/do-not-disrupt"
	// TaintDisrupted is put on a node berth drains to remove it, before
	// the first eviction; a restarted controller finds its drains by it.
	TaintDisrupted = "berth.dev/disrupted"

	// AnnotationReplacedBy on a node names the cheaper node berth launched
	// to replace it; the node is drained once that one is Ready.
	AnnotationReplacedBy = "berth.dev/replaced-by"
	// AnnotationReplacementStarted is the RFC 3339 time the replacement
	// was launched.
	AnnotationReplacementStarted = "berth.dev/replacement-started"
	// AnnotationReplacementLaunching is the RFC 3339 time berth began to
	// launch a replacement for the node: written before the launch, and
	// replaced by AnnotationReplacedBy after it. While it is younger than
	// the max provision time and the node is not marked, a replacement
	// may be booting that no mark names (the controller stopped between
	// the launch and the mark): no other replacement is launched for the
	// node, nor a cheaper replacement anywhere.
	AnnotationReplacementLaunching = "berth.dev/replacement-launching"
	// AnnotationDisruptionStarted is the RFC 3339 time berth tainted a node
	// to drain it; the drain timeout counts from it, across restarts.
	AnnotationDisruptionStarted = "berth.dev/disruption-started"
	// AnnotationRemovalAccepted is the RFC 3339 time the cloud provider
	// accepted removing a drained node (a Cluster API Machine marked and its
	// replicas lowered). From then the removal is not undone: the drain is
	// over, nothing untaints the node, and berth asks the provider again
	// while the node is there, across restarts.
	AnnotationRemovalAccepted = "berth.dev/removal-accepted"
	// AnnotationRemovalWaiting is the RFC 3339 time a cloud provider first
	// answered that it cannot remove a drained, emptied node until it has
	// settled on its own (a Cluster API MachineSet still creating a Machine
	// its replicas ask for). The drain timeout waits for the provider up to
	// the max provision time after it, across restarts.
	AnnotationRemovalWaiting = "berth.dev/removal-waiting"
	// AnnotationDrainEmptied is the RFC 3339 time berth first found a
	// draining node with no pod left to evict or shutting down, and
	// AnnotationDrainCriticalTurn the time it first found only critical
	// pods left to evict (they go last): the drain timeout counts again
	// from each, across restarts.
	AnnotationDrainEmptied      = "berth.dev/drain-emptied"
	AnnotationDrainCriticalTurn = "berth.dev/drain-critical-turn"
	// AnnotationDrainVolumesWaited is the RFC 3339 time berth stopped
	// waiting for an emptied node's volumes to detach: they detached (or
	// none was attached), or their VolumeAttachments were still there a
	// drain timeout after the node emptied and berth asked for its removal
	// all the same. The drain timeout counts again from it, across
	// restarts.
	AnnotationDrainVolumesWaited = "berth.dev/drain-volumes-waited"
	// AnnotationDrainDeletionDelayed is the RFC 3339 time berth first
	// found an emptied node (its volumes waited for) carrying an
	// annotation of AnnotationPrefixDelayDeletion: its removal waits from
	// then, up to the controller's --node-deletion-delay-timeout, across
	// restarts.
	AnnotationDrainDeletionDelayed = "berth.dev/drain-deletion-delayed"
	// AnnotationPrefixDelayDeletion is Cluster Autoscaler's prefix of the
	// node annotations by which another controller delays a drained
	// node's deletion until it has cleaned up (it removes its annotation
	// when done).
	AnnotationPrefixDelayDeletion = "delay-deletion.cluster-autoscaler.kubernetes.io/"
	// AnnotationDrainGivenUp is the RFC 3339 time berth last gave up a
	// drain of the node (and untainted it): the node is not drained again
	// for a cool-down after it, across restarts.
	AnnotationDrainGivenUp = "berth.dev/drain-given-up"

	// LabelScaleDownDisabled on a node opts it out of scale-down.
	LabelScaleDownDisabled = "berth.dev/scale-down-disabled"

	// AnnotationKWOKNode marks a node as managed by KWOK (fake kubelet). Its
	// value is AnnotationKWOKNodeValue.
	AnnotationKWOKNode = "kwok.x-k8s.io/node"
	// AnnotationKWOKNodeValue is the value of AnnotationKWOKNode.
	AnnotationKWOKNodeValue = "fake"
	// AnnotationReadyAt on a KWOK node is the RFC 3339 time at which KWOK
	// turns it Ready; it simulates the boot time of a real machine.
	AnnotationReadyAt = "berth.dev/ready-at"

	// TaintStandby (NoSchedule) and the label of the same key (value
	// "true") mark a standby node: a machine berth launched to keep a
	// Headroom's standby units, suspended once Ready and resumed when pods
	// need room. No pod is scheduled on it while it is standby; scale-down,
	// repair, drift and expiry leave it to the standby controller.
	TaintStandby = "berth.dev/standby"
	// AnnotationStandbyFor on a standby node names the Headroom whose
	// standby units it keeps.
	AnnotationStandbyFor = "berth.dev/standby-for"
	// AnnotationSuspendedAt on a standby node is the RFC 3339 time its
	// machine was suspended; absent while it boots before its suspension.
	AnnotationSuspendedAt = "berth.dev/suspended-at"
	// AnnotationStandbyRemoving on a standby node is the RFC 3339 time
	// the standby controller decided to delete it; written with the node's
	// resourceVersion, so that it and a resume never both win.
	AnnotationStandbyRemoving = "berth.dev/standby-removing"
	// AnnotationResumedAt on a node is the RFC 3339 time its machine was
	// resumed from standby: it boots again from then, as a launch does
	// from the node's creation.
	AnnotationResumedAt = "berth.dev/resumed-at"

	// AnnotationLaunchHash is written by berth on every node it launches: a
	// hash of what of its NodeGroup's spec the node was launched with
	// (template labels, taints, startup taints, provider object). A node
	// whose hash differs from the group's now has drifted.
	AnnotationLaunchHash = "berth.dev/launch-hash"
	// TaintInterruption on a node is an interruption notice (the KWOK
	// provider's, `berth dev interrupt`; any termination handler may write
	// it). AnnotationInterruptionDeadline, if set, says when the node goes
	// (RFC 3339).
	TaintInterruption              = "berth.dev/interruption"
	AnnotationInterruptionDeadline = "berth.dev/interruption-deadline"
	// AnnotationDisruptionReason is written by berth, with the drain's
	// taint or replacement mark, on a node it disrupts: a DisruptionReason.
	AnnotationDisruptionReason = "berth.dev/disruption-reason"
	// NodeConditionDisruption is the node condition berth keeps on its
	// nodes: True while berth disrupts the node (reason: why), False
	// otherwise (reason: Removable, Kept, or the rule that blocks).
	NodeConditionDisruption = "BerthDisruption"

	// AnnotationAdoptedAt is written by berth, with the owner mark, on a
	// node it adopted into a NodeGroup (a Cluster API Machine's node): the
	// RFC 3339 time of the adoption. A node that had lived longer than the
	// max provision time when it was adopted is not a launch, and the
	// launch timeout never deletes it.
	AnnotationAdoptedAt = "berth.dev/adopted-at"

	// AnnotationDeleteRequestedBy is written by berth, with Cluster API's
	// cluster.x-k8s.io/delete-machine, on a Machine it removes: the UID of
	// the NodeGroup. berth lowers a MachineDeployment's replicas only by the
	// number of live Machines carrying this mark, so that a restart between
	// marking and lowering never lowers twice, and a delete-machine mark
	// someone else set is never taken for berth's.
	AnnotationDeleteRequestedBy = "berth.dev/delete-requested-by"

	// AnnotationDeleteMachineKept is written by berth, "true", on a Machine
	// it removes that carried cluster.x-k8s.io/delete-machine already
	// (someone else's mark): a removal berth undoes takes its own mark off
	// and leaves that one.
	AnnotationDeleteMachineKept = "berth.dev/delete-machine-kept"

	// ProviderIDPrefixKWOK prefixes the provider ID of nodes launched by the
	// KWOK cloud provider.
	ProviderIDPrefixKWOK = "kwok://"

	// SystemNamespace is where berth runs and keeps its pods (placeholders,
	// per-node reserve, leader election lease).
	SystemNamespace = "berth-system"

	// LabelHeadroom names the Headroom a placeholder, per-node reserve pod
	// or virtual unit belongs to.
	LabelHeadroom = "berth.dev/headroom"
	// LabelHeadroomRole is "placeholder" or "node-reserve" on the pods berth
	// runs for a Headroom.
	LabelHeadroomRole = "berth.dev/headroom-role"
	// LabelCapacityBuffer names the CapacityBuffer ("namespace.name") a
	// virtual unit belongs to.
	LabelCapacityBuffer = "berth.dev/capacitybuffer"
	// AnnotationVirtual marks a pod that only exists in berth's plans (a
	// headroom unit or buffer chunk), never in the API.
	AnnotationVirtual = "berth.dev/virtual"

	// PriorityClassHeadroom is the low priority of placeholder pods: any
	// real pod preempts them, and they never preempt.
	PriorityClassHeadroom = "berth-headroom"
	// PriorityHeadroom is its value.
	PriorityHeadroom int32 = -10
	// PriorityClassNodeReserve is the priority of per-node reserve pods.
	PriorityClassNodeReserve = "berth-node-reserve"
	// PriorityNodeReserve is its value.
	PriorityNodeReserve int32 = 900000000
	// PriorityClassBurstCritical is for workloads allowed to take the
	// per-node reserve: they preempt its pods.
	PriorityClassBurstCritical = "berth-burst-critical"
	// PriorityBurstCritical is its value.
	PriorityBurstCritical int32 = 1000000000

	// SchedulingGateCompanion is the scheduling gate berth's admission
	// webhook adds to pods a CompanionProfile selects; berth removes it once
	// the room for the pod's companion is held (or after the profile's
	// ungateAfter, whatever happens).
	SchedulingGateCompanion = "berth.dev/companion-headroom"
	// AnnotationCompanionGateSince on a gated workload pod that was
	// created with other scheduling gates besides berth's (another
	// admission controller's, such as Kueue's) is when berth's gate became
	// the only one (RFC 3339), or empty while others remain: the
	// profile's ungateAfter counts from then, not from the pod's creation.
	AnnotationCompanionGateSince = "berth.dev/companion-gate-since"
	// AnnotationCompanionRequests on a gated workload pod holds the requests
	// of its companion (a JSON resource list, written by berth): the planner
	// places the pod only where the companion fits too.
	AnnotationCompanionRequests = "berth.dev/companion-requests"
	// LabelCompanionShareKey on a workload pod and on a companion
	// placeholder is the share key (a hash): workloads with the same key on
	// one node share one companion, so a node that has the key needs no
	// room for a second one.
	LabelCompanionShareKey = "berth.dev/companion-share-key"
	// LabelCompanionFor on a workload pod is its UID; the companion
	// placeholder's pod affinity selects it.
	LabelCompanionFor = "berth.dev/companion-for"
	// SchedulingGateCompanionHandover is the scheduling gate berth's
	// admission webhook adds to a companion (a pod some CompanionProfile
	// recognises, pinned to a node where berth holds room for that
	// profile's companions). berth's controller removes it right after the
	// companion has taken the room of one placeholder there (at the latest
	// 10 s after the pod's creation while a berth controller runs, at once
	// when the hand-over fails), so the companion is scheduled into that
	// room and never next to a placeholder still holding it.
	SchedulingGateCompanionHandover = "berth.dev/companion-handover"
	// AnnotationCompanionNode on a companion placeholder is the node it
	// holds room on.
	AnnotationCompanionNode = "berth.dev/companion-node"
	// AnnotationCompanionProfile on a companion placeholder is the
	// CompanionProfile whose companion it holds room for.
	AnnotationCompanionProfile = "berth.dev/companion-profile"
	// HeadroomRoleCompanion is the LabelHeadroomRole of companion
	// placeholders.
	HeadroomRoleCompanion = "companion"
	// PriorityClassCompanionHeadroom is the priority of companion
	// placeholders: below every workload, so that a companion (or any pod)
	// preempts them rather than anything else.
	PriorityClassCompanionHeadroom = "berth-companion-headroom"
	// PriorityCompanionHeadroom is its value.
	PriorityCompanionHeadroom int32 = -1000

	// EventReasonTriggeredScaleUp is the reason of the event berth records
	// on a pending pod it launches a node for ("Launching node X (node
	// group G, ...) for this pod"). The tenant controller reads it back.
	EventReasonTriggeredScaleUp = "TriggeredScaleUp"
	// EventReasonNotTriggerScaleUp is the reason of the event berth records
	// on a pending pod no node can be launched for, with why per node
	// group ("0/3 node groups fit: large: node group at maxSize 3; ...").
	EventReasonNotTriggerScaleUp = "NotTriggerScaleUp"
)
