package kwok

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// Reasons of the Ready condition of a suspended or resuming KWOK node.
const (
	ReasonSuspended = "MachineSuspended"
	ReasonResuming  = "MachineResuming"
)

// Suspend stops a Ready standby node's machine: the suspended-at
// annotation (KWOK's stages then neither renew its lease nor turn it Ready
// again) and a Ready condition of False.
func (p *Provider) Suspend(ctx context.Context, nodeName string) error {
	node, err := p.kwokNode(ctx, nodeName)
	if err != nil {
		return err
	}
	if !nodeutil.Standby(node) {
		return fmt.Errorf("node %s is not a standby node: only standby nodes are suspended", nodeName)
	}
	now := p.clock.Now()
	if node.Annotations[v1alpha1.AnnotationSuspendedAt] == "" {
		patch := client.MergeFrom(node.DeepCopy())
		node.Annotations[v1alpha1.AnnotationSuspendedAt] = now.UTC().Format(time.RFC3339)
		if err := p.client.Patch(ctx, node, patch); err != nil {
			return fmt.Errorf("marking node %s suspended: %w", nodeName, err)
		}
	}
	patch := client.MergeFrom(node.DeepCopy())
	setReady(node, corev1.ConditionFalse, ReasonSuspended, "machine is suspended (standby)", now)
	if err := p.client.Status().Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("suspending node %s: %w", nodeName, err)
	}
	return nil
}

// Resume starts a suspended standby node's machine again: the standby
// taint, label and annotations go and berth.dev/ready-at is set to now
// plus the group's resume delay, so that KWOK turns it Ready then.
func (p *Provider) Resume(ctx context.Context, nodeName string) error {
	node, err := p.kwokNode(ctx, nodeName)
	if err != nil {
		return err
	}
	if !nodeutil.Suspended(node) {
		return fmt.Errorf("node %s is not a suspended standby node", nodeName)
	}
	ng := &v1alpha1.NodeGroup{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: node.Labels[v1alpha1.LabelNodeGroup]}, ng); err != nil {
		return fmt.Errorf("reading node group of node %s: %w", nodeName, err)
	}
	now := p.clock.Now()
	// The condition first, while the suspended-at annotation still keeps
	// KWOK's stages off the node; then the marks. Both with the optimistic
	// lock: a node changed meanwhile (the standby controller marked it for
	// removal) is not resumed on a stale view.
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	setReady(node, corev1.ConditionFalse, ReasonResuming, "machine is resuming", now)
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			// NotReady from now: repair must not count the suspension.
			node.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		}
	}
	if err := p.client.Status().Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("resuming node %s: %w", nodeName, err)
	}
	patch = client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	nodeutil.LeaveStandby(node)
	delete(node.Annotations, v1alpha1.AnnotationSuspendedAt)
	node.Annotations[v1alpha1.AnnotationResumedAt] = now.UTC().Format(time.RFC3339)
	node.Annotations[v1alpha1.AnnotationReadyAt] = now.Add(ng.Spec.Provider.KWOK.ResumeAfter()).UTC().Format(time.RFC3339Nano)
	if err := p.client.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("resuming node %s: %w", nodeName, err)
	}
	return nil
}

// kwokNode reads a node and checks that KWOK runs it.
func (p *Provider) kwokNode(ctx context.Context, nodeName string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := p.client.Get(ctx, client.ObjectKey{Name: nodeName}, node)
	if apierrors.IsNotFound(err) {
		return nil, &cloudprovider.NotFoundError{Name: nodeName}
	}
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	if node.Annotations[v1alpha1.AnnotationKWOKNode] != v1alpha1.AnnotationKWOKNodeValue {
		return nil, &cloudprovider.NotFoundError{Name: nodeName}
	}
	return node, nil
}

// setReady sets the node's Ready condition.
func setReady(node *corev1.Node, status corev1.ConditionStatus, reason, msg string, now time.Time) {
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg,
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			if node.Status.Conditions[i].Status == status {
				c.LastTransitionTime = node.Status.Conditions[i].LastTransitionTime
			}
			node.Status.Conditions[i] = c
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, c)
}
