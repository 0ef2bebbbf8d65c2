// Package cleanup implements `berth cleanup`: after berth is uninstalled
// (`helm uninstall`, or before it), it takes away what berth left in the
// cluster that would otherwise act or block without it. It is idempotent
// and touches only berth's own marks.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cli/clusterflags"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/webhook"
)

// NewCommand returns `berth cleanup`.
func NewCommand() *cobra.Command {
	var cluster clusterflags.Flags
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what berth leaves in a cluster once it no longer runs there",
		Long: `Run it after 'helm uninstall berth' (or with the controller stopped):
  - deletes the MutatingWebhookConfiguration berth-companion (it would send
    new pods to a webhook that no longer answers);
  - removes berth's scheduling gates from pods (they would wait for ever);
  - stops berth's drains: the berth.dev/disrupted taint and the drain and
    replacement annotations come off nodes, except on a node whose removal
    the provider accepted (berth.dev/removal-accepted): its machine is
    going, so it stays tainted and is listed;
  - removes the finalizer berth.dev/nodes from NodeGroups (their deletion
    would wait for ever);
  - deletes the headroom placeholders, per-node reserves and companion
    placeholders berth created in berth-system.
Nodes keep berth's owner mark: a berth installed again goes on managing them.
Cluster API Machines that berth marked for deletion are not changed: their
removal may already be under way.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cluster.Client()
			if err != nil {
				return err
			}
			return Run(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	cluster.Bind(cmd.Flags())
	return cmd
}

// Run does the cleanup and says what it did on out. Every step runs; the
// errors of all are returned together.
func Run(ctx context.Context, c client.Client, out io.Writer) error {
	steps := []struct {
		what string
		do   func(context.Context, client.Client) (int, error)
	}{
		{"webhook configurations deleted", deleteWebhookConfiguration},
		{"pods ungated", ungatePods},
		{"drains stopped on nodes", func(ctx context.Context, c client.Client) (int, error) { return stopDrains(ctx, c, out) }},
		{"node group finalizers removed", removeFinalizers},
		{"placeholder and reserve objects deleted", deletePlaceholders},
	}
	var errs []error
	for _, s := range steps {
		n, err := s.do(ctx, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.what, err))
		}
		_, _ = fmt.Fprintf(out, "%s: %d\n", s.what, n)
	}
	return errors.Join(errs...)
}

func deleteWebhookConfiguration(ctx context.Context, c client.Client) (int, error) {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ConfigName}}
	if err := c.Delete(ctx, cfg); apierrors.IsNotFound(err) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	return 1, nil
}

// berthGates are the scheduling gates only berth removes.
var berthGates = []string{v1alpha1.SchedulingGateCompanion, v1alpha1.SchedulingGateCompanionHandover}

func ungatePods(ctx context.Context, c client.Client) (int, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return 0, err
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		kept := slices.DeleteFunc(slices.Clone(p.Spec.SchedulingGates), func(g corev1.PodSchedulingGate) bool { return slices.Contains(berthGates, g.Name) })
		if len(kept) == len(p.Spec.SchedulingGates) {
			continue
		}
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		p.Spec.SchedulingGates = kept
		if err := c.Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		n++
	}
	return n, nil
}

// stopDrains untaints the nodes berth drains. A node whose removal the
// provider accepted keeps its taint (a pod scheduled there would go with
// the machine) and is named on out.
func stopDrains(ctx context.Context, c client.Client, out io.Writer) (int, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return 0, err
	}
	n := 0
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if at, ok := node.Annotations[v1alpha1.AnnotationRemovalAccepted]; ok {
			_, _ = fmt.Fprintf(out, "node %s stays tainted: its provider accepted removing it at %s\n", node.Name, at)
			continue
		}
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if !nodeutil.StopDrain(node) {
			continue
		}
		if err := c.Patch(ctx, node, patch); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("node %s: %w", node.Name, err)
		}
		n++
	}
	return n, nil
}

func removeFinalizers(ctx context.Context, c client.Client) (int, error) {
	groups := &v1alpha1.NodeGroupList{}
	if err := c.List(ctx, groups); meta.IsNoMatchError(err) {
		return 0, nil // the CRDs are gone already
	} else if err != nil {
		return 0, err
	}
	n := 0
	for i := range groups.Items {
		g := &groups.Items[i]
		if !controllerutil.ContainsFinalizer(g, v1alpha1.FinalizerNodes) {
			continue
		}
		patch := client.MergeFromWithOptions(g.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(g, v1alpha1.FinalizerNodes)
		if err := c.Patch(ctx, g, patch); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("node group %s: %w", g.Name, err)
		}
		n++
	}
	return n, nil
}

func deletePlaceholders(ctx context.Context, c client.Client) (int, error) {
	n := 0
	in := client.InNamespace(v1alpha1.SystemNamespace)
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.DaemonSetList{}} {
		if err := c.List(ctx, list, in, client.HasLabels{v1alpha1.LabelHeadroom}); err != nil {
			return n, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return n, err
		}
		for _, o := range items {
			if err := c.Delete(ctx, o.(client.Object), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
				return n, err
			}
			n++
		}
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, in, client.MatchingLabels{v1alpha1.LabelHeadroomRole: v1alpha1.HeadroomRoleCompanion}); err != nil {
		return n, err
	}
	for i := range pods.Items {
		if err := c.Delete(ctx, &pods.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return n, err
		}
		n++
	}
	return n, nil
}
