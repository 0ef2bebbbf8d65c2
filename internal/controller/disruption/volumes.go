package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// Event reasons of the wait for an emptied node's volumes to detach.
const (
	// ReasonAwaitingVolumeDetachment: the node's pods are gone and its
	// removal waits for their volumes to detach.
	ReasonAwaitingVolumeDetachment = "AwaitingVolumeDetachment"
	// ReasonVolumesStillAttached: the wait is over and the node is removed
	// with volumes still attached.
	ReasonVolumesStillAttached = "VolumesStillAttached"
)

// +kubebuilder:rbac:groups=storage.k8s.io,resources=volumeattachments,verbs=list;watch

// detachWait decides whether the removal of a drained node with nothing
// left to evict or shutting down (since from) waits for the volumes of
// the pods that left it to detach: the attach-detach controller deletes
// a VolumeAttachment once the volume is unmounted and detached, and a
// machine removed before that leaves the volume to be detached by force,
// which the volume's next pod elsewhere waits for (6 minutes,
// kube-controller-manager's maxWaitForUnmountDuration) and which may not
// flush its writes. Karpenter waits for the same. The wait lasts up to
// the drain timeout from from; after it the node is removed all the
// same, with a warning. The end of the wait, either way (also when there
// was nothing to wait for), is written on the node
// (AnnotationDrainVolumesWaited), and the removal has the drain timeout
// from then, across restarts; the node is not waited for again. A read of
// the attachments that fails counts as attachments left. It returns
// whether to wait and the time the removal's drain timeout counts from.
func (c *Controller) detachWait(ctx context.Context, w *world, n *corev1.Node, pods []*corev1.Pod, from, started time.Time, timeout time.Duration) (bool, time.Time) {
	if at, ok := recordedClock(n, v1alpha1.AnnotationDrainVolumesWaited, c.volumesWaited, started); ok {
		return false, later(at, from) // waited already
	}
	attached, err := c.attachedVolumes(ctx, n.Name, pods)
	if err == nil && len(attached) == 0 {
		// The wait is over (or there was none): recorded, so that the
		// provider has the drain timeout from now also when a restart
		// came during the wait.
		return false, later(c.drainClock(ctx, w, n, v1alpha1.AnnotationDrainVolumesWaited, c.volumesWaited, started), from)
	}
	what := attachedText(attached, err)
	if c.Clock.Since(from) < timeout {
		c.sayOnce(n, corev1.EventTypeNormal, ReasonAwaitingVolumeDetachment, fmt.Sprintf(
			"The node's pods are gone; its removal waits up to %s for their volumes to detach: %s", timeout, what))
		return true, from
	}
	at := c.drainClock(ctx, w, n, v1alpha1.AnnotationDrainVolumesWaited, c.volumesWaited, started)
	c.warnOnce(n, ReasonVolumesStillAttached, fmt.Sprintf(
		"Volumes still attached %s after the node's pods were gone: %s; removing the node all the same", timeout, what))
	return false, later(at, from)
}

// attachedText names the volumes attachedVolumes found, or why it found
// none, for an event.
func attachedText(attached []string, err error) string {
	if err != nil {
		return "they could not be read (" + err.Error() + ")"
	}
	return strings.Join(attached, ", ")
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// attachedVolumes names the PersistentVolumes still attached to the node
// (its VolumeAttachments, from the cache: one it shows after its deletion
// only makes the wait longer, and one it does not show yet can only be a
// staying pod's, as no other pod comes to the tainted node) that do not belong to
// a pod staying on it: a pod that goes with the machine (a DaemonSet's, a
// mirror pod, one that came back) keeps its volume mounted until then.
// An attachment of an inline volume (no PersistentVolume) is not waited
// for, as in Karpenter. pods are the node's pods as read now.
func (c *Controller) attachedVolumes(ctx context.Context, node string, pods []*corev1.Pod) ([]string, error) {
	list := &storagev1.VolumeAttachmentList{}
	if err := c.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("reading the volume attachments of node %s: %w", node, err)
	}
	var out []string
	for i := range list.Items {
		va := &list.Items[i]
		if va.Spec.NodeName == node && va.Spec.Source.PersistentVolumeName != nil {
			out = append(out, *va.Spec.Source.PersistentVolumeName)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	staying := sets.New[string]()
	for _, p := range pods {
		if podutil.IsTerminal(p) {
			continue
		}
		for i := range p.Spec.Volumes {
			key, ok := podutil.VolumeClaim(p, &p.Spec.Volumes[i])
			if !ok {
				continue
			}
			claim := &corev1.PersistentVolumeClaim{}
			if err := c.Client.Get(ctx, key, claim); apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("reading claim %s of pod %s on node %s: %w", key, p.Name, node, err)
			}
			staying.Insert(claim.Spec.VolumeName)
		}
	}
	out = slices.DeleteFunc(out, staying.Has)
	slices.Sort(out)
	return slices.Compact(out), nil
}
