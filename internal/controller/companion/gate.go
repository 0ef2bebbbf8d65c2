package companion

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/webhook"
)

// gated moves a gated workload on: annotate it with its companion, wait
// for the provisioning round to nominate a node for it, hold the
// companion's room there, ungate. Past the profile's ungateAfter it
// ungates whatever happened.
func (r *Reconciler) gated(ctx context.Context, w *corev1.Pod) (reconcile.Result, error) {
	profiles, err := r.profiles(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	lookup := webhook.Lookup{Reader: r.Client}
	p, err := companion.Selecting(ctx, profiles, w, lookup)
	if err != nil {
		return reconcile.Result{}, err
	}
	if p == nil {
		return reconcile.Result{}, r.ungate(ctx, w, "no CompanionProfile selects this pod any more")
	}
	now := r.Clock.Now()
	deadline := w.CreationTimestamp.Add(companion.UngateAfter(p).Duration)
	if !now.Before(deadline) {
		return reconcile.Result{}, r.ungate(ctx, w, fmt.Sprintf(
			"no node with room for it and its companion was found within %s (profile %s); scheduling it as usual", companion.UngateAfter(p).Duration, p.Name))
	}
	wait := reconcile.Result{RequeueAfter: min(recheck, deadline.Sub(now))}
	if _, ok := w.Annotations[v1alpha1.AnnotationCompanionRequests]; !ok {
		c, err := companion.For(ctx, p, w, lookup)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(c.Requests) == 0 {
			return reconcile.Result{}, r.ungate(ctx, w, fmt.Sprintf("profile %s gives no companion size for this pod", p.Name))
		}
		return wait, r.annotate(ctx, w, p, c)
	}
	node := w.Status.NominatedNodeName
	if node == "" {
		return wait, nil
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); err != nil {
		return wait, client.IgnoreNotFound(err) // launching: not in the cache yet
	}
	if err := r.holdRoom(ctx, w, p, node); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.ungate(ctx, w, "")
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
	patch := client.MergeFromWithOptions(w.DeepCopy(), client.MergeFromWithOptimisticLock{})
	w.Spec.SchedulingGates = slices.DeleteFunc(slices.Clone(w.Spec.SchedulingGates), func(g corev1.PodSchedulingGate) bool {
		return g.Name == v1alpha1.SchedulingGateCompanion
	})
	if err := r.Client.Patch(ctx, w, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removing the companion gate of %s/%s: %w", w.Namespace, w.Name, err)
	}
	ungateSeconds.Observe(r.Clock.Since(w.CreationTimestamp.Time).Seconds())
	if skipped != "" {
		steps.WithLabelValues("skipped").Inc()
		r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, ReasonSkipped, "Ungate", "Companion headroom skipped: %s", skipped)
	}
	log.FromContext(ctx).V(1).Info("removed the companion gate", "pod", client.ObjectKeyFromObject(w), "skipped", skipped)
	return nil
}

func describe(rl corev1.ResourceList) string {
	cpu, mem := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory]
	return fmt.Sprintf("cpu %s, memory %s", cpu.String(), mem.String())
}
