package provisioning

import (
	"context"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
)

// nominations maps pending pods ("namespace/name") to the launching node
// berth planned them on, and those nodes to their node group. Safe for
// concurrent use: rounds write it, pod events read it.
type nominations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]string
	// group is the node group of each node in m, where it is known.
	group map[string]string
	// handedOver are the nominations nodereserve made for burst-critical
	// pods (a per-node reserve handed over), with when this provisioner
	// first saw each (handOverGrace).
	handedOver map[types.NamespacedName]handOver
}

// handOver is a nomination another controller made: to node, first seen
// at seen.
type handOver struct {
	node string
	seen time.Time
}

func newNominations() *nominations {
	return &nominations{m: map[types.NamespacedName]string{}, group: map[string]string{}, handedOver: map[types.NamespacedName]handOver{}}
}

// handOverGrace is how long berth holds the room of a burst-critical pod
// on the node nodereserve handed its reserve to it on: kube-scheduler
// binds it there within seconds of the reserve pod's removal. Past it
// the pod needs a node again: kube-scheduler never clears the nomination
// of a pod that never preempts (the class's policy), and berth would
// otherwise hold it on that node for ever.
const handOverGrace = 30 * time.Second

// handedOverSince returns when this provisioner first saw pod nominated
// to node by another controller.
func (n *nominations) handedOverSince(pod types.NamespacedName, node string, now time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, ok := n.handedOver[pod]
	if !ok || h.node != node {
		h = handOver{node: node, seen: now}
		n.handedOver[pod] = h
	}
	return h.seen
}

// set records pod's nomination to node, of node group group ("": not
// known; a group recorded for the node before stays).
func (n *nominations) set(pod types.NamespacedName, node, group string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[pod] = node
	if group != "" {
		n.group[node] = group
	}
}

// mayBeBooting reports whether the node berth nominated pod to, not known
// this round, may be booting unseen: its group's launching instances
// could not be listed (unlisted), or its group is not known and some
// group's could not.
func (n *nominations) mayBeBooting(pod types.NamespacedName, known, unlisted map[string]bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	node := n.m[pod]
	return node != "" && !known[node] && n.unlistedGroup(node, unlisted)
}

// unlistedGroup reports whether node's group is unlisted, or not known
// while some group is. The caller holds mu.
func (n *nominations) unlistedGroup(node string, unlisted map[string]bool) bool {
	if g, ok := n.group[node]; ok {
		return unlisted[g]
	}
	return len(unlisted) > 0
}

func (n *nominations) get(pod types.NamespacedName) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[pod]
}

func (n *nominations) snapshot() map[types.NamespacedName]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.m)
}

// forget drops the nominations of pods that no longer wait (waiting), to
// nodes that will never come (unjoined), and to nodes not known this
// round unless they may be booting unseen (unlistedGroup); and the groups
// of the nodes no nomination names any more.
func (n *nominations) forget(waiting map[types.NamespacedName]bool, known, unjoined, unlisted map[string]bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	named := make(map[string]bool, len(n.group))
	for pod, node := range n.m {
		if !waiting[pod] || unjoined[node] || !known[node] && !n.unlistedGroup(node, unlisted) {
			delete(n.m, pod)
			continue
		}
		named[node] = true
	}
	for node := range n.group {
		if !named[node] {
			delete(n.group, node)
		}
	}
	for pod := range n.handedOver {
		if !waiting[pod] {
			delete(n.handedOver, pod)
		}
	}
}

// onPodUpdate notices the scheduler clearing a nomination berth made for a
// pod that still waits, and queues the pod to have it restored. The
// scheduler clears it when it retries the pod while the node is still
// tainted not-ready; a moment later the taint goes and the pod would be
// placed by scoring instead of where the plan put it.
func (p *Provisioner) onPodUpdate(oldPod, newPod *corev1.Pod) {
	if oldPod.Status.NominatedNodeName == "" || newPod.Status.NominatedNodeName != "" || newPod.Spec.NodeName != "" {
		return
	}
	node := oldPod.Status.NominatedNodeName
	if p.nominated.get(client.ObjectKeyFromObject(newPod)) != node {
		return
	}
	if _, ready := p.schedulableSince(node); ready {
		return // the node is up: the scheduler decides now
	}
	select {
	case p.renominateQ <- newPod:
	default: // the next round restores it
	}
}

// keepNominations restores cleared nominations until ctx ends.
func (p *Provisioner) keepNominations(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pod := <-p.renominateQ:
			if node := p.nominated.get(client.ObjectKeyFromObject(pod)); node != "" {
				p.nominate(ctx, pod.DeepCopy(), node, "")
			}
		}
	}
}

// logNominationLost notes, at debug level, a pod that needs a node again
// although berth had launched one for it.
func (p *Provisioner) logNominationLost(ctx context.Context, pod *corev1.Pod, node string) {
	since, ready := p.schedulableSince(node)
	log.FromContext(ctx).V(1).Info("pod needs a node again although berth launched one for it", "pod", klog.KObj(pod),
		"launchedFor", node, "nodeSchedulableSince", since, "nodeSchedulable", ready, "nominatedNodeName", pod.Status.NominatedNodeName,
		"scheduled", podScheduledMessage(pod))
}

func podScheduledMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return string(c.Status) + " " + c.Reason + ": " + c.Message
		}
	}
	return ""
}

// renominate points pods the plan put on nodes that are still launching at
// those nodes again, and companion-gated pods at their planned node. The scheduler clears a nomination whenever it retries
// the pod before the node is Ready (the node is still tainted, preemption
// finds nothing), so berth keeps restating it until the pod is bound.
func (p *Provisioner) renominate(ctx context.Context, plan *scaleup.Plan, nodes []*corev1.Node, pending map[types.NamespacedName]*corev1.Pod) {
	if plan == nil {
		return
	}
	launching, groupOf := map[string]bool{}, map[string]string{}
	for _, n := range p.inflight.merge(nodes) {
		if g := n.Labels[v1alpha1.LabelNodeGroup]; g != "" {
			groupOf[n.Name] = g
			launching[n.Name] = !nodeutil.Schedulable(n)
		}
	}
	for _, pl := range plan.ExistingNodePlacements {
		// A companion-gated pod learns its node from the nomination, where
		// berth then holds its companion's room (controller/companion).
		if pod := pending[pl.Pod.Key()]; pod != nil && (launching[pl.Node] || podutil.IsCompanionGated(pod)) && pod.Status.NominatedNodeName != pl.Node {
			p.nominate(ctx, pod, pl.Node, groupOf[pl.Node])
		}
	}
}

// schedulableSince returns when a node was first seen schedulable, and
// whether it has been.
func (p *Provisioner) schedulableSince(node string) (time.Time, bool) { return p.schedulable.of(node) }

// graceEnd returns when berth stops holding a pod's room on the node berth
// nominated it to: nominationGrace after the node became schedulable. ok
// is false while the node boots, and for nominations berth did not make
// (preemption's, or the scheduler's while it binds, which it keeps and
// clears), but for the hand-over of a per-node reserve to a
// burst-critical pod (nodereserve; its class never preempts, and the
// scheduler never clears it): handOverGrace after berth first saw it.
func (p *Provisioner) graceEnd(pod *corev1.Pod) (end time.Time, ok bool) {
	node := pod.Status.NominatedNodeName
	key := client.ObjectKeyFromObject(pod)
	if p.nominated.get(key) != node {
		if pod.Spec.PriorityClassName != v1alpha1.PriorityClassBurstCritical {
			return time.Time{}, false
		}
		return p.nominated.handedOverSince(key, node, p.Clock.Now()).Add(handOverGrace), true
	}
	since, ok := p.schedulableSince(node)
	return since.Add(nominationGrace), ok
}

// nominationFailed reports whether a pod berth nominated is still unbound
// after its grace: the scheduler placed others there, and the pod needs a
// node again. A pod the scheduler has not tried yet (one of a burst, in a
// busy scheduler's queue) keeps its room.
func (p *Provisioner) nominationFailed(pod *corev1.Pod, now time.Time) bool {
	if podutil.NotTried(pod) {
		return false
	}
	end, ok := p.graceEnd(pod)
	return ok && now.After(end)
}

// neverUp reports whether a node a pod is nominated to will not take it:
// it is being deleted, or it has not been schedulable once in the max
// provision time since its launch or its resume from standby (the launch
// timeout removes it, within
// its caps; a Cluster API Node stays until its Machine goes). The pod
// needs a node again.
func (p *Provisioner) neverUp(n *corev1.Node, now time.Time) bool {
	if n == nil {
		return false
	}
	if n.DeletionTimestamp != nil {
		return true
	}
	_, ready := p.schedulableSince(n.Name)
	ready = ready || n.Labels[v1alpha1.LabelInitialized] == "true" && n.Annotations[v1alpha1.AnnotationResumedAt] == "" // up once: as a restart finds it
	booted := nodeutil.BootedSince(n)
	return !ready && p.opts.MaxProvisionTime > 0 && !booted.IsZero() && now.Sub(booted) > p.opts.MaxProvisionTime
}

// noteGraceEnd moves recheckAt forward to the end of a held pod's grace.
func (p *Provisioner) noteGraceEnd(pod *corev1.Pod) {
	if end, ok := p.graceEnd(pod); ok && (p.recheckAt.IsZero() || end.Before(p.recheckAt)) {
		p.recheckAt = end
	}
}

// fullFor is how long rounds plan without a node group whose provider
// refused a launch at maxSize: time for the view to show the nodes that
// filled it, short enough that room a removal makes is soon used.
const fullFor = 30 * time.Second

// fullOfferings are the offerings of the groups refused at maxSize less
// than fullFor ago (the others are forgotten).
func (p *Provisioner) fullOfferings(groups map[string]*v1alpha1.NodeGroup) []scaleup.Offering {
	var out []scaleup.Offering
	now := p.Clock.Now()
	for name, until := range p.full {
		ng := groups[name]
		if ng == nil || !now.Before(until) {
			delete(p.full, name)
			continue
		}
		out = append(out, OfferingsOf(ng)...)
	}
	return out
}

// unlistedOfferings are the offerings of the groups whose instances could
// not be listed since this replica leads (recoverGroups), or whose
// launching instances could not be listed this round (round.unlisted).
func (p *Provisioner) unlistedOfferings(groups map[string]*v1alpha1.NodeGroup, unlisted map[string]bool) []scaleup.Offering {
	var out []scaleup.Offering
	for name, ng := range groups {
		if _, unrecovered := p.unrecovered[name]; unrecovered || unlisted[name] {
			out = append(out, OfferingsOf(ng)...)
		}
	}
	return out
}

// OfferingsOf are all the offerings of a node group.
func OfferingsOf(ng *v1alpha1.NodeGroup) []scaleup.Offering {
	var out []scaleup.Offering
	for _, it := range ng.Spec.InstanceTypes {
		for _, o := range it.Offerings {
			out = append(out, scaleup.Offering{NodeGroup: ng.Name, InstanceType: it.Name, Zone: o.Zone, CapacityType: string(o.CapacityType)})
		}
	}
	return out
}

// forgetNominations drops nominations of pods that no longer wait, and of
// nodes that are gone (known: the node names trackSchedulable returned)
// or will never come (a launched instance that never registered its Node,
// unjoined), but not when the node's group's launching instances could
// not be listed this round (unlisted; any group's, for a node whose group
// berth does not know): the node may be booting there.
func (p *Provisioner) forgetNominations(known map[string]bool, waiting map[types.NamespacedName]bool, unlisted map[string]bool) {
	p.nominated.forget(waiting, known, p.unjoined, unlisted)
}
