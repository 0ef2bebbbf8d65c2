package companion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/podutil"
)

// holdRoom creates the placeholder of workload w on node, with the
// companion's requests req, unless shared: the node has w's share key
// already (keyOnNode), so the companion is shared and needs no more room.
func (r *Reconciler) holdRoom(ctx context.Context, w *corev1.Pod, p *v1alpha1.CompanionProfile, node string, shared bool, req corev1.ResourceList) error {
	if !shared {
		ph := r.placeholderFor(w, p, node, req)
		err := r.Client.Create(ctx, ph)
		switch {
		case err == nil:
			steps.WithLabelValues("held").Inc()
			r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonHeld, "Hold",
				"Holding room for this pod's companion on node %s (placeholder %s/%s)", node, ph.Namespace, ph.Name)
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating the companion placeholder of %s/%s: %w", w.Namespace, w.Name, err)
		}
		// Another workload of the key holds the room on the node already
		// (reconciled at the same time, or not yet in this cache).
	}
	steps.WithLabelValues("shared").Inc()
	r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonShared, "Hold",
		"Node %s already has this pod's companion (or room held for it): no more room held", node)
	return nil
}

// keyOnNode reports whether a pod of w's namespace other than w that is
// bound to node, or a placeholder holding room there, has w's share key.
// Workloads that share a companion mount one volume, which is bound to a
// claim of one namespace: a pod of another namespace with the key's label
// shares nothing and must not take w's room.
// A workload that is only nominated to the node holds nothing yet: the
// planner counted one companion for all workloads of a key it put on a
// node, and counting nominated ones would have each of them leave the
// room to the others (TestWorkloadsOfOneShareKeyHoldOneRoomPerNode).
// Workloads of a key reconciled at once (or with a cache that has not
// seen the placeholder yet) all try to create it; its name is the same
// for all of them, so one holds and the others share.
func (r *Reconciler) keyOnNode(ctx context.Context, w *corev1.Pod, node string) (bool, error) {
	pods := &corev1.PodList{}
	// Read only: the cache's objects are not copied.
	if err := r.Client.List(ctx, pods, client.MatchingLabels{v1alpha1.LabelCompanionShareKey: w.Labels[v1alpha1.LabelCompanionShareKey]},
		client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for i := range pods.Items {
		o := &pods.Items[i]
		if o.UID == w.UID || podutil.IsTerminal(o) || o.DeletionTimestamp != nil || (o.Namespace != w.Namespace && !isPlaceholder(o)) {
			continue
		}
		if o.Spec.NodeName == node || (isPlaceholder(o) && o.Annotations[v1alpha1.AnnotationCompanionNode] == node) {
			return true, nil
		}
	}
	return false, nil
}

// PlaceholderName is the name of the placeholder that holds room for the
// companion of share key key on node: one name per key and node, so that
// the API server refuses a second one however many workloads of the key
// are reconciled at once or how far behind the cache is.
func PlaceholderName(key, node string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + node))
	return "companion-" + hex.EncodeToString(sum[:20])
}

// placeholderFor builds the placeholder: a pause pod in berth-system with
// the companion's requests, pinned to node (node affinity on its name) and
// to the workload (pod affinity on the hostname, as the reference driver
// does, so that other schedulers and autoscalers see the pair), at the
// companion-headroom priority that anything preempts.
func (r *Reconciler) placeholderFor(w *corev1.Pod, p *v1alpha1.CompanionProfile, node string, req corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: PlaceholderName(w.Labels[v1alpha1.LabelCompanionShareKey], node), Namespace: v1alpha1.SystemNamespace,
			Labels: map[string]string{
				v1alpha1.LabelHeadroomRole:      v1alpha1.HeadroomRoleCompanion,
				v1alpha1.LabelCompanionShareKey: w.Labels[v1alpha1.LabelCompanionShareKey],
			},
			Annotations: map[string]string{
				annotationWorkload: w.Namespace + "/" + w.Name, v1alpha1.AnnotationCompanionProfile: p.Name, v1alpha1.AnnotationCompanionNode: node,
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
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), // no user: the image's (65535), or the one OpenShift assigns
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, // restricted Pod Security (berth-system)
				},
			}},
		},
	}
}

// placeholder deletes a placeholder that is no longer needed (needed
// says why), or one a companion took whose deletion a restart cut short.
// A companion on its node that has taken no room yet takes this one (the
// companion's own pass usually does that first; this one covers a pass
// the watch did not trigger, e.g. after a restart).
func (r *Reconciler) placeholder(ctx context.Context, ph *corev1.Pod) (reconcile.Result, error) {
	if ph.DeletionTimestamp != nil || r.claims.isReleased(ph.UID) {
		return reconcile.Result{}, nil
	}
	why, err := r.needed(ctx, ph)
	if err != nil {
		return reconcile.Result{}, err
	}
	if why != "" {
		return reconcile.Result{}, r.deletePlaceholder(ctx, ph)
	}
	defer r.handover.lock(ph.Annotations[v1alpha1.AnnotationCompanionNode])()
	if r.claims.isReleased(ph.UID) {
		return reconcile.Result{}, nil
	}
	c, taken, err := r.companionFor(ctx, ph)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case taken:
		return reconcile.Result{}, r.deletePlaceholder(ctx, ph)
	case c != nil:
		handed, err := r.handOver(ctx, c, ph)
		if err != nil || handed {
			return reconcile.Result{}, err
		}
		// The companion went before it was marked: the placeholder is
		// looked at again as when no companion was there (nothing else
		// brings it back before the informer's resync).
	}
	return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
}

// companionFor looks at the companions of ph's profile on ph's node
// (bound or pinned there): taken is true when one has taken ph's room
// already; else c is one that has taken no placeholder's room and may
// take ph's, or nil. It reads only the pods the profile recognises, from
// the cache without copying them (it runs every 10 s per placeholder);
// c is a copy.
func (r *Reconciler) companionFor(ctx context.Context, ph *corev1.Pod) (c *corev1.Pod, taken bool, err error) {
	p := &v1alpha1.CompanionProfile{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ph.Annotations[v1alpha1.AnnotationCompanionProfile]}, p); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	if companion.Validate(p) != nil {
		return nil, false, nil // it recognises no companion
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.Recognize.Selector)
	if err != nil {
		return nil, false, err
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(p.Spec.Recognize.Namespace), client.MatchingLabelsSelector{Selector: sel},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, false, err
	}
	node := ph.Annotations[v1alpha1.AnnotationCompanionNode]
	for i := range pods.Items {
		o := &pods.Items[i]
		if companionNode(o) != node || !companion.Recognizes(p, o) {
			continue
		}
		took := r.tookBy(o)
		if took == placeholderID(ph) {
			return nil, true, nil
		}
		if c == nil && took == "" && o.DeletionTimestamp == nil && !podutil.IsTerminal(o) && mayTake(o, ph) {
			c = o
		}
	}
	if c != nil {
		c = c.DeepCopy() // the hand-over writes to it
	}
	return c, false, nil
}

// needed returns why the placeholder is not needed any more, or "". It
// holds room for the companion of its share key on its node, for the
// workload that created it and, once bound, for every other workload of
// the key there that shared it: it is needed while one of them is bound
// or nominated to the node, not finished, and has not run for
// holdAfterRunning without a companion.
func (r *Reconciler) needed(ctx context.Context, ph *corev1.Pod) (string, error) {
	creator, why, err := r.workloadOf(ctx, ph)
	if err != nil || why == "" {
		return why, err
	}
	if ph.Spec.NodeName == "" {
		// Pending, it binds only next to its creator (pod affinity).
		return why, nil
	}
	node := ph.Annotations[v1alpha1.AnnotationCompanionNode]
	key, ok := splitKey(ph.Annotations[annotationWorkload])
	if !ok {
		return why, nil
	}
	others := &corev1.PodList{}
	// Only the workload's namespace shares its key (keyOnNode); read only.
	if err := r.Client.List(ctx, others, client.InNamespace(key.Namespace),
		client.MatchingLabels{v1alpha1.LabelCompanionShareKey: ph.Labels[v1alpha1.LabelCompanionShareKey]}, client.UnsafeDisableDeepCopy); err != nil {
		return "", err
	}
	for i := range others.Items {
		o := &others.Items[i]
		if isPlaceholder(o) || (creator != nil && o.UID == creator.UID) {
			continue
		}
		if (o.Spec.NodeName == node || (o.Spec.NodeName == "" && o.Status.NominatedNodeName == node)) && r.stillWaits(o) {
			return "", nil
		}
	}
	return why, nil
}

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
	node := ph.Annotations[v1alpha1.AnnotationCompanionNode]
	switch {
	case string(w.UID) != ph.Annotations[v1alpha1.LabelCompanionFor] || w.DeletionTimestamp != nil || podutil.IsTerminal(w):
		return nil, "workload gone", nil
	case w.Spec.NodeName != "" && w.Spec.NodeName != node:
		return w, "workload on another node", nil
	case !r.stillWaits(w):
		return w, "no companion came", nil
	}
	return w, "", nil
}

// stillWaits: a workload that is not finished and has not run for
// holdAfterRunning may still get its companion.
func (r *Reconciler) stillWaits(w *corev1.Pod) bool {
	if w.DeletionTimestamp != nil || podutil.IsTerminal(w) {
		return false
	}
	return w.Status.Phase != corev1.PodRunning || !runningSince(w).Add(holdAfterRunning).Before(r.Clock.Now())
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
