package companion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
	"github.com/berth-dev/berth/internal/podutil"
)

// annotationTookRoom on a companion names the placeholder whose room it
// took. Each companion takes the room of one placeholder, once: a
// companion that binds next to its placeholder while the node still has
// free room would otherwise leave the placeholder holding a second slice,
// and the last workloads planned on that node would no longer fit there
// (TestACompanionTakesTheRoomOfOnePlaceholderOnce).
const annotationTookRoom = "berth.dev/took-companion-room"

// handoverGateMax bounds how long berth's hand-over gate stays on a
// companion, whatever happens: a companion is never held back longer.
const handoverGateMax = 10 * time.Second

// maybeCompanion hands a placeholder's room to a companion: a pod some
// profile recognises, bound to a node or pinned to one, takes the room of
// one placeholder of that profile on that node (the placeholder is
// deleted), so that it fits there without preempting anything else and
// the room is not held twice. A companion the webhook gated is ungated
// right after (and at once when anything goes wrong or takes too long).
func (r *Reconciler) maybeCompanion(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	if pod.DeletionTimestamp != nil || podutil.IsTerminal(pod) {
		return reconcile.Result{}, nil
	}
	node := companionNode(pod)
	gated := companion.HandoverGated(pod)
	// The gate's bound first; a pod with no node has no room to take.
	if gated && (node == "" || r.Clock.Since(pod.CreationTimestamp.Time) > handoverGateMax) {
		return reconcile.Result{}, r.releaseHandoverGate(ctx, pod)
	}
	if node == "" {
		return reconcile.Result{}, nil
	}
	profiles, err := r.profiles(ctx)
	if err != nil {
		return reconcile.Result{}, r.failOpen(ctx, pod, gated, err)
	}
	// The profiles that recognise it, by name (as the webhook looks).
	slices.SortFunc(profiles, func(a, b v1alpha1.CompanionProfile) int { return strings.Compare(a.Name, b.Name) })
	for i := range profiles {
		if !companion.Recognizes(&profiles[i], pod) {
			continue
		}
		took, err := r.takeRoom(ctx, pod, node, profiles[i].Name)
		if err != nil {
			return reconcile.Result{}, r.failOpen(ctx, pod, gated, err)
		}
		if took {
			break
		}
	}
	if gated {
		return reconcile.Result{}, r.releaseHandoverGate(ctx, pod)
	}
	return reconcile.Result{}, nil
}

// takeRoom gives the companion the room of one placeholder of profile on
// node, once; took says whether it has one (now or before).
func (r *Reconciler) takeRoom(ctx context.Context, pod *corev1.Pod, node, profile string) (took bool, err error) {
	defer r.handover.lock(node)()
	phs, err := r.placeholdersOn(ctx, r.Client, node, profile)
	if err != nil {
		return false, err
	}
	if companion.HandoverGated(pod) && !slices.ContainsFunc(phs, func(ph *corev1.Pod) bool { return mayTake(pod, ph) }) {
		// The webhook saw room held here; this cache may not have the
		// placeholder yet (created a moment ago). Ungated next to it, the
		// companion would hold a second slice: ask the API server.
		if phs, err = r.placeholdersOn(ctx, r.apiReader(), node, profile); err != nil {
			return false, err
		}
	}
	if took := r.tookBy(pod); took != "" {
		// Taken before; finish a deletion a restart may have cut short.
		if i := slices.IndexFunc(phs, func(ph *corev1.Pod) bool { return placeholderID(ph) == took }); i >= 0 {
			return true, r.deletePlaceholder(ctx, phs[i])
		}
		return true, nil
	}
	for _, ph := range phs {
		if mayTake(pod, ph) {
			return r.handOver(ctx, pod, ph)
		}
	}
	return false, nil
}

// tookBy is the placeholder (placeholderID) whose room companion c took,
// as the API says or, while the cache lags, as this controller remembers;
// "" when it has taken none.
func (r *Reconciler) tookBy(c *corev1.Pod) string {
	return cmp.Or(c.Annotations[annotationTookRoom], r.claims.took(c.UID))
}

// placeholderID names a placeholder in the took annotation: its name and
// UID, because a later placeholder of the same share key and node has
// the same name.
func placeholderID(ph *corev1.Pod) string { return ph.Name + "/" + string(ph.UID) }

// failOpen releases a gated companion when its hand-over failed, and
// returns the failure (the hand-over is retried; the companion does not
// wait for it).
func (r *Reconciler) failOpen(ctx context.Context, pod *corev1.Pod, gated bool, err error) error {
	if !gated || apierrors.IsConflict(err) {
		// A conflict is a stale read: retried at once, and the gate still
		// goes by handoverGateMax.
		return err
	}
	return errors.Join(err, r.releaseHandoverGate(ctx, pod))
}

// releaseHandoverGate removes berth's hand-over gate (pod is as the
// hand-over's patch returned it, or as read).
func (r *Reconciler) releaseHandoverGate(ctx context.Context, pod *corev1.Pod) error {
	_, err := r.removeGate(ctx, pod, v1alpha1.SchedulingGateCompanionHandover)
	return err
}

// placeholdersOn lists the live placeholders of profile on node, those
// that hold room (bound) first, then the oldest first: a companion takes
// room that is really held.
func (r *Reconciler) placeholdersOn(ctx context.Context, reader client.Reader, node, profile string) ([]*corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := reader.List(ctx, l, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels(companion.PlaceholderLabels())); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for i := range l.Items {
		ph := &l.Items[i]
		if companion.HoldsRoomOn(ph, node, profile) && !r.claims.isReleased(ph.UID) {
			out = append(out, ph)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if ab, bb := a.Spec.NodeName != "", b.Spec.NodeName != ""; ab != bb {
			if ab {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// mayTake: a companion is created after its workload is bound, which is
// after berth held the room; an older companion (of a workload that ran
// before) takes nothing. Creation times have a resolution of a second.
func mayTake(c, ph *corev1.Pod) bool {
	return !c.CreationTimestamp.Before(&ph.CreationTimestamp)
}

// handOver marks the companion as having taken ph's room, then deletes
// ph. Marked first, so that a restart in between never lets it take a
// second one; the deletion is finished on the next pass.
func (r *Reconciler) handOver(ctx context.Context, c, ph *corev1.Pod) (bool, error) {
	// Locked: a conflict means this pass read a stale companion (one that
	// may have taken a room already); it is retried on a fresh read.
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	c.Annotations = maps.Clone(c.Annotations)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationTookRoom] = placeholderID(ph)
	if err := r.Client.Patch(ctx, c, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("marking companion %s/%s as taking placeholder %s: %w", c.Namespace, c.Name, ph.Name, err)
	}
	r.claims.take(c.UID, placeholderID(ph), r.Clock.Now())
	if err := r.deletePlaceholder(ctx, ph); err != nil {
		return true, err
	}
	node := ph.Annotations[v1alpha1.AnnotationCompanionNode]
	steps.WithLabelValues("handed_over").Inc()
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonHandover, "Handover",
		"Took the room berth held on node %s (placeholder %s removed)", node, ph.Name)
	if key, ok := splitKey(ph.Annotations[annotationWorkload]); ok {
		w := &corev1.Pod{}
		if err := r.Client.Get(ctx, key, w); err == nil && string(w.UID) == ph.Annotations[v1alpha1.LabelCompanionFor] {
			steps.WithLabelValues("arrived").Inc()
			r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, ReasonArrived, "Release",
				"Companion %s/%s came to node %s and took the room held for it (placeholder %s removed)", c.Namespace, c.Name, node, ph.Name)
		}
	}
	return true, nil
}

func (r *Reconciler) deletePlaceholder(ctx context.Context, ph *corev1.Pod) error {
	if err := r.Client.Delete(ctx, ph, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting companion placeholder %s: %w", ph.Name, err)
	}
	r.claims.release(ph.UID, r.Clock.Now())
	return nil
}

// claims remembers, for a while, the hand-overs and deletions this
// controller made, because its cache shows them only a moment later: the
// next reconcile must neither let a companion take a second placeholder
// nor give a deleted placeholder to another companion. The API holds the
// truth (the companion's annotation, the placeholder's absence); this only
// covers the cache's lag. The zero value is ready to use.
type claims struct {
	mu        sync.Mutex
	companion map[types.UID]claim
	released  map[types.UID]time.Time
}

type claim struct {
	placeholder string
	at          time.Time
}

// claimMemory is how long a claim is remembered: far longer than a
// cache's lag.
const claimMemory = 2 * time.Minute

func (c *claims) take(companion types.UID, placeholder string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(now)
	if c.companion == nil {
		c.companion = map[types.UID]claim{}
	}
	c.companion[companion] = claim{placeholder: placeholder, at: now}
}

func (c *claims) release(placeholder types.UID, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(now)
	if c.released == nil {
		c.released = map[types.UID]time.Time{}
	}
	c.released[placeholder] = now
}

func (c *claims) took(companion types.UID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.companion[companion].placeholder
}

func (c *claims) isReleased(placeholder types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.released[placeholder]
	return ok
}

func (c *claims) prune(now time.Time) {
	for k, v := range c.companion {
		if now.Sub(v.at) > claimMemory {
			delete(c.companion, k)
		}
	}
	for k, at := range c.released {
		if now.Sub(at) > claimMemory {
			delete(c.released, k)
		}
	}
}

// companionNode is the node a pod runs on, or the one node its required
// node affinity pins it to.
func companionNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	return companion.PinnedNode(pod)
}

func splitKey(s string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}
