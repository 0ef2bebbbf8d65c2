package companion

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/podutil"
)

// annotationNode on a placeholder is the node it holds room on.
const annotationNode = "berth.dev/companion-node"

// holdRoom creates the placeholder of workload w on node, unless a pod on
// (or nominated to) the node already carries w's share key: then the
// companion is shared and needs no more room.
func (r *Reconciler) holdRoom(ctx context.Context, w *corev1.Pod, p *v1alpha1.CompanionProfile, node string) error {
	key := w.Labels[v1alpha1.LabelCompanionShareKey]
	shared, err := r.keyOnNode(ctx, key, node, w.UID)
	if err != nil {
		return err
	}
	if shared {
		steps.WithLabelValues("shared").Inc()
		r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonShared, "Hold",
			"Node %s already has this pod's companion (or room for it): no more room held", node)
		return nil
	}
	ph, err := r.placeholderFor(w, p, node)
	if err != nil {
		return err
	}
	if err := r.Client.Create(ctx, ph); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the companion placeholder of %s/%s: %w", w.Namespace, w.Name, err)
	}
	steps.WithLabelValues("held").Inc()
	r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonHeld, "Hold",
		"Holding room for this pod's companion on node %s (placeholder %s/%s)", node, ph.Namespace, ph.Name)
	return nil
}

// keyOnNode reports whether a pod other than the workload uid, bound or
// nominated to node (or a placeholder holding room there), has the share
// key.
func (r *Reconciler) keyOnNode(ctx context.Context, key, node string, uid types.UID) (bool, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingLabels{v1alpha1.LabelCompanionShareKey: key}); err != nil {
		return false, err
	}
	for i := range pods.Items {
		o := &pods.Items[i]
		if o.UID == uid || podutil.IsTerminal(o) || o.DeletionTimestamp != nil {
			continue
		}
		if o.Spec.NodeName == node || o.Status.NominatedNodeName == node || o.Annotations[annotationNode] == node {
			return true, nil
		}
	}
	return false, nil
}

// placeholderFor builds the placeholder: a pause pod in berth-system with
// the companion's requests, pinned to node (node affinity on its name) and
// to the workload (pod affinity on the hostname, as the reference driver
// does, so that other schedulers and autoscalers see the pair), at the
// companion-headroom priority that anything preempts.
func (r *Reconciler) placeholderFor(w *corev1.Pod, p *v1alpha1.CompanionProfile, node string) (*corev1.Pod, error) {
	var req corev1.ResourceList
	if err := json.Unmarshal([]byte(w.Annotations[v1alpha1.AnnotationCompanionRequests]), &req); err != nil {
		return nil, fmt.Errorf("reading the companion requests of %s/%s: %w", w.Namespace, w.Name, err)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "companion-" + string(w.UID), Namespace: v1alpha1.SystemNamespace,
			Labels: map[string]string{
				v1alpha1.LabelHeadroomRole:      v1alpha1.HeadroomRoleCompanion,
				v1alpha1.LabelCompanionShareKey: w.Labels[v1alpha1.LabelCompanionShareKey],
			},
			Annotations: map[string]string{
				annotationWorkload: w.Namespace + "/" + w.Name, annotationProfile: p.Name, annotationNode: node,
				v1alpha1.LabelCompanionFor: string(w.UID),
			},
		},
		Spec: corev1.PodSpec{
			PriorityClassName:             v1alpha1.PriorityClassCompanionHeadroom,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Tolerations:                   w.Spec.Tolerations,
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
					}}}},
				}},
				PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelCompanionFor: string(w.UID)}},
					Namespaces:    []string{w.Namespace},
					TopologyKey:   corev1.LabelHostname,
				}}},
			},
			Containers: []corev1.Container{{
				Name: "pause", Image: r.PauseImage,
				Resources: corev1.ResourceRequirements{Requests: req},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65535),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}, nil
}

// placeholder deletes a placeholder that is no longer needed: its
// workload is gone, finished or on another node, its companion runs on
// the node, or the workload has run for holdAfterRunning without one.
func (r *Reconciler) placeholder(ctx context.Context, ph *corev1.Pod) (reconcile.Result, error) {
	if ph.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	w, why, err := r.workloadOf(ctx, ph)
	if err != nil {
		return reconcile.Result{}, err
	}
	if why == "" {
		why, err = r.companionRunning(ctx, ph, w)
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	if why == "" {
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if err := r.Client.Delete(ctx, ph, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("deleting companion placeholder %s: %w", ph.Name, err)
	}
	if w != nil && why == reasonArrived {
		steps.WithLabelValues("arrived").Inc()
		r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonArrived, "Release", "Companion runs on node %s; placeholder %s removed", ph.Annotations[annotationNode], ph.Name)
	}
	return reconcile.Result{}, nil
}

const reasonArrived = "companion arrived"

// workloadOf returns the placeholder's workload and, when the placeholder
// is not needed for it any more, why.
func (r *Reconciler) workloadOf(ctx context.Context, ph *corev1.Pod) (*corev1.Pod, string, error) {
	key, ok := splitKey(ph.Annotations[annotationWorkload])
	if !ok {
		return nil, "no workload", nil
	}
	w := &corev1.Pod{}
	if err := r.Client.Get(ctx, key, w); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "workload gone", nil
		}
		return nil, "", err
	}
	node := ph.Annotations[annotationNode]
	switch {
	case string(w.UID) != ph.Annotations[v1alpha1.LabelCompanionFor] || w.DeletionTimestamp != nil || podutil.IsTerminal(w):
		return nil, "workload gone", nil
	case w.Spec.NodeName != "" && w.Spec.NodeName != node:
		return w, "workload on another node", nil
	case w.Status.Phase == corev1.PodRunning && runningSince(w).Add(holdAfterRunning).Before(r.Clock.Now()):
		return w, "no companion came", nil
	}
	return w, "", nil
}

// companionRunning says reasonArrived when a pod the placeholder's profile
// recognises as a companion runs on its node.
func (r *Reconciler) companionRunning(ctx context.Context, ph *corev1.Pod, _ *corev1.Pod) (string, error) {
	p := &v1alpha1.CompanionProfile{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ph.Annotations[annotationProfile]}, p); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	pods := &corev1.PodList{}
	opts := []client.ListOption{}
	if p.Spec.Recognize.Namespace != "" {
		opts = append(opts, client.InNamespace(p.Spec.Recognize.Namespace))
	}
	if err := r.Client.List(ctx, pods, opts...); err != nil {
		return "", err
	}
	node := ph.Annotations[annotationNode]
	if slices.ContainsFunc(pods.Items, func(o corev1.Pod) bool {
		return o.Spec.NodeName == node && o.Status.Phase == corev1.PodRunning && companion.Recognizes(p, &o)
	}) {
		return reasonArrived, nil
	}
	return "", nil
}

func runningSince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return p.CreationTimestamp.Time
}
