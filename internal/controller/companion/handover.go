package companion

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
)

// maybeCompanion hands a placeholder's room to a companion: a pending pod
// some profile recognises, pinned to one node, is given the room of a
// placeholder on that node (the placeholder is deleted), so that it fits
// there without preempting anything else.
func (r *Reconciler) maybeCompanion(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	node := pinnedNode(pod)
	if node == "" {
		return reconcile.Result{}, nil
	}
	profiles, err := r.profiles(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	var profile string
	for i := range profiles {
		if companion.Recognizes(&profiles[i], pod) {
			profile = profiles[i].Name
			break
		}
	}
	if profile == "" {
		return reconcile.Result{}, nil
	}
	phs := &corev1.PodList{}
	if err := r.Client.List(ctx, phs, client.InNamespace(v1alpha1.SystemNamespace),
		client.MatchingLabels{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range phs.Items {
		ph := &phs.Items[i]
		if ph.Annotations[annotationNode] != node || ph.Annotations[annotationProfile] != profile || ph.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, ph, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("handing placeholder %s to companion %s/%s: %w", ph.Name, pod.Namespace, pod.Name, err)
		}
		steps.WithLabelValues("handed_over").Inc()
		r.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonHandover, "Handover",
			"Took the room berth held on node %s (placeholder %s removed)", node, ph.Name)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, nil
}

// pinnedNode is the one node a pod may run on by its required node
// affinity on metadata.name, as CSI drivers pin their mount pods, or "".
func pinnedNode(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, f := range terms[0].MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
			return f.Values[0]
		}
	}
	return ""
}

func splitKey(s string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}
