package companion

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// gated moves a gated workload on: annotate it with its companion, wait
// for the provisioning round to nominate a node for it and for that node
// to take pods, hold the companion's room there, ungate. The deadline
// (the profile's ungateAfter) is the first check: past it the gate goes
// in this pass whatever else fails (ungateLate). Before it, a failing step
// is returned and retried (the controller retries within recheck, so the
// deadline is still kept).
func (r *Reconciler) gated(ctx context.Context, w *corev1.Pod) (reconcile.Result, error) {
	profiles, err := r.profiles(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	lookup := clusterread.Lookup{Reader: r.Client, Fresh: r.APIReader}
	p, selectErr := companion.Selecting(ctx, profiles, w, lookup)
	if selectErr == nil && p == nil {
		return reconcile.Result{}, r.ungate(ctx, w, "no CompanionProfile selects this pod any more")
	}
	after := gateBound(p, profiles)
	now := r.Clock.Now()
	start, err := r.gateStart(ctx, w, now)
	if err != nil || start.IsZero() {
		// Other gates hold the pod (start zero): berth's clock has not
		// started; their removal is an update of the pod, looked at then.
		return reconcile.Result{}, err
	}
	deadline := start.Add(after)
	if !now.Before(deadline) {
		return reconcile.Result{}, r.ungateLate(ctx, w, p, after, selectErr)
	}
	if selectErr != nil {
		return reconcile.Result{}, fmt.Errorf("finding the CompanionProfile of %s/%s: %w", w.Namespace, w.Name, selectErr)
	}
	wait := min(recheck, deadline.Sub(now))
	req, annotated, err := companion.Requests(w)
	switch {
	case err != nil:
		return reconcile.Result{}, r.ungate(ctx, w, unreadable(err))
	case !annotated:
		c, err := companion.For(ctx, p, w, lookup)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(c.Requests) == 0 {
			return reconcile.Result{}, r.ungate(ctx, w, fmt.Sprintf("profile %s gives no companion size for this pod", p.Name))
		}
		return reconcile.Result{RequeueAfter: wait}, r.annotate(ctx, w, p, c)
	}
	n, err := r.nominatedNode(ctx, w)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case n == nil || !schedulableFor(n, w):
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	shared, err := r.keyOnNode(ctx, w, n.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	extra := req
	if shared {
		extra = nil
	}
	ok, why, err := r.nodeHasRoom(ctx, n, w, extra, profiles)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case !ok:
		log.FromContext(ctx).V(1).Info("waiting for room on the nominated node", "pod", klog.KObj(w), "why", why)
		return reconcile.Result{RequeueAfter: min(roomRecheck, wait)}, nil
	}
	if err := r.holdRoom(ctx, w, p, n.Name, shared, req); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.ungate(ctx, w, "")
}

// gateStart is when the profile's ungateAfter starts for w: its
// creation, or, for a pod created with other scheduling gates besides
// berth's (another admission controller's, such as Kueue's, which admits
// the pod later), the moment berth's gate was seen to be the only one
// (AnnotationCompanionGateSince, written then, so it survives a
// restart). Zero while other gates remain: the pod is held by them, not
// by berth, and berth neither plans it (podutil.IsCompanionGated) nor
// counts its time.
func (r *Reconciler) gateStart(ctx context.Context, w *corev1.Pod, now time.Time) (time.Time, error) {
	others := slices.ContainsFunc(w.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name != v1alpha1.SchedulingGateCompanion
	})
	since, marked := w.Annotations[v1alpha1.AnnotationCompanionGateSince]
	switch {
	case others && marked && since == "":
		return time.Time{}, nil
	case others:
		return time.Time{}, r.markGateSince(ctx, w, "")
	case !marked:
		return w.CreationTimestamp.Time, nil
	case since == "":
		stamp := now.UTC().Format(time.RFC3339)
		return now, r.markGateSince(ctx, w, stamp)
	}
	t, err := time.Parse(time.RFC3339, since)
	switch {
	case err != nil || t.Before(w.CreationTimestamp.Time):
		return w.CreationTimestamp.Time, nil // not berth's writing: the creation bounds it
	case t.After(now):
		// Not a time berth stamped (a pod template carrying one, a clock
		// ahead): from now, so that the gate's bound holds.
		return now, r.markGateSince(ctx, w, now.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// markGateSince writes AnnotationCompanionGateSince on w.
func (r *Reconciler) markGateSince(ctx context.Context, w *corev1.Pod, value string) error {
	patch := client.MergeFromWithOptions(w.DeepCopy(), client.MergeFromWithOptimisticLock{})
	w.Annotations = maps.Clone(w.Annotations)
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[v1alpha1.AnnotationCompanionGateSince] = value
	if err := r.Client.Patch(ctx, w, patch); err != nil {
		return fmt.Errorf("marking when the companion gate of %s/%s started: %w", w.Namespace, w.Name, err)
	}
	return nil
}

// gateBound is how long w's gate may be held: the ungateAfter of p, the
// profile that selects it, or, when which one could not be told (nil p:
// a read failed), the shortest of all profiles', so that no profile's
// bound is ever exceeded.
func gateBound(p *v1alpha1.CompanionProfile, profiles []v1alpha1.CompanionProfile) time.Duration {
	if p != nil {
		return companion.UngateAfter(p).Duration
	}
	bound := companion.UngateAfter(&v1alpha1.CompanionProfile{}).Duration
	for i := range profiles {
		bound = min(bound, companion.UngateAfter(&profiles[i]).Duration)
	}
	return bound
}

// ungateLate removes the gate of a workload past its deadline, in this
// pass, whatever fails on the way. If it carries its companion's size
// and its nominated node exists (still starting, or full for the
// moment), the room is held there first and no event is sent:
// kube-scheduler tries the nominated node first once it can. Otherwise,
// or when holding fails, the event says why no room was held.
func (r *Reconciler) ungateLate(ctx context.Context, w *corev1.Pod, p *v1alpha1.CompanionProfile, after time.Duration, selectErr error) error {
	var skipped string
	if selectErr != nil {
		skipped = fmt.Sprintf("which CompanionProfile selects it could not be told within %s (%v); scheduling it as usual", after, selectErr)
	} else {
		var err error
		if skipped, err = r.holdLate(ctx, w, p, after); err != nil {
			log.FromContext(ctx).Error(err, "holding companion room at the gate's deadline failed; removing the gate without it", "pod", klog.KObj(w))
			skipped = fmt.Sprintf("holding room for its companion failed at the deadline (%v); scheduling it as usual", err)
		}
	}
	return r.ungate(ctx, w, skipped)
}

// holdLate holds w's companion room on its nominated node at the
// deadline; skipped says why it held none (or err why it failed).
func (r *Reconciler) holdLate(ctx context.Context, w *corev1.Pod, p *v1alpha1.CompanionProfile, after time.Duration) (skipped string, err error) {
	notFound := fmt.Sprintf("no node with room for it and its companion was found within %s (profile %s); scheduling it as usual", after, p.Name)
	req, annotated, err := companion.Requests(w)
	switch {
	case err != nil:
		return unreadable(err), nil
	case !annotated:
		return notFound, nil
	}
	n, err := r.nominatedNode(ctx, w)
	if err != nil || n == nil {
		return notFound, err
	}
	shared, err := r.keyOnNode(ctx, w, n.Name)
	if err != nil {
		return "", err
	}
	return "", r.holdRoom(ctx, w, p, n.Name, shared, req)
}

// unreadable says why a workload whose companion size cannot be read is
// ungated: it has no companion berth can plan.
func unreadable(err error) string {
	return fmt.Sprintf("its companion's size cannot be read (%v); scheduling it as usual, without room for a companion", err)
}

// nominatedNode returns the node the provisioning round nominated w to,
// or nil while there is none (or it is launching and not in the cache).
func (r *Reconciler) nominatedNode(ctx context.Context, w *corev1.Pod) (*corev1.Node, error) {
	if w.Status.NominatedNodeName == "" {
		return nil, nil
	}
	n := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: w.Status.NominatedNodeName}, n); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return n, nil
}

// schedulableFor reports whether the scheduler can place w on n now: the
// node is Ready, not cordoned, and w tolerates its NoSchedule and
// NoExecute taints (a booting node's not-ready taint, a node group's
// startup taints). Until then w stays gated: ungated earlier, the
// scheduler finds its nominated node unfit and binds it wherever there is
// room for the workload alone, and its companion, pinned to that node,
// finds none and preempts (TestGateLifecycle).
func schedulableFor(n *corev1.Node, w *corev1.Pod) bool {
	if !nodeutil.Ready(n) || n.Spec.Unschedulable {
		return false
	}
	_, untolerated := snapshot.UntoleratedTaint(n.Spec.Taints, w.Spec.Tolerations)
	return !untolerated
}

// annotate writes the companion's requests and share key on the workload,
// which makes the provisioning round plan it with room for the companion.
func (r *Reconciler) annotate(ctx context.Context, w *corev1.Pod, p *v1alpha1.CompanionProfile, c companion.Companion) error {
	raw, err := json.Marshal(c.Requests)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Labels = maps.Clone(w.Labels)
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[v1alpha1.LabelCompanionShareKey] = c.ShareKey
	w.Labels[v1alpha1.LabelCompanionFor] = string(w.UID)
	w.Annotations = maps.Clone(w.Annotations)
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[v1alpha1.AnnotationCompanionRequests] = string(raw)
	if err := r.Client.Patch(ctx, w, patch); err != nil {
		return fmt.Errorf("annotating %s/%s with its companion: %w", w.Namespace, w.Name, err)
	}
	steps.WithLabelValues("gated").Inc()
	r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonGated, "Gate",
		"Waiting for a node with room for this pod and its companion (%s, profile %s)", describe(c.Requests), p.Name)
	return nil
}

// ungate removes berth's gate (and only it). A non-empty skipped says why
// no room was held, as an event.
func (r *Reconciler) ungate(ctx context.Context, w *corev1.Pod, skipped string) error {
	if gone, err := r.removeGate(ctx, w, v1alpha1.SchedulingGateCompanion); gone || err != nil {
		return err
	}
	ungateSeconds.Observe(r.Clock.Since(w.CreationTimestamp.Time).Seconds())
	if skipped != "" {
		steps.WithLabelValues("skipped").Inc()
		r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, ReasonSkipped, "Ungate", "Companion headroom skipped: %s", skipped)
	}
	log.FromContext(ctx).V(1).Info("removed the companion gate", "pod", client.ObjectKeyFromObject(w), "skipped", skipped)
	return nil
}

// removeGate removes the scheduling gate name (and only it) from pod,
// under an optimistic lock so that a stale read is retried, not written
// over. gone: the pod is gone (nothing to do).
func (r *Reconciler) removeGate(ctx context.Context, pod *corev1.Pod, name string) (gone bool, err error) {
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pod.Spec.SchedulingGates = slices.DeleteFunc(slices.Clone(pod.Spec.SchedulingGates), func(g corev1.PodSchedulingGate) bool {
		return g.Name == name
	})
	if err := r.Client.Patch(ctx, pod, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("removing the gate %s of %s/%s: %w", name, pod.Namespace, pod.Name, err)
	}
	return false, nil
}

func describe(rl corev1.ResourceList) string {
	cpu, mem := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory]
	return fmt.Sprintf("cpu %s, memory %s", cpu.String(), mem.String())
}
