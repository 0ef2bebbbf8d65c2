package tenant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Progress is one line of what a tenant is doing: its phase and the
// reason and message of its Ready condition.
func Progress(t *v1alpha1.Tenant) string {
	if t.Status.Phase == "" {
		return t.Name + ": created; berth has not reported on it yet"
	}
	line := t.Name + ": " + string(t.Status.Phase)
	if c := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		line += " (" + c.Reason + "): " + c.Message
	}
	return line
}

// errTimeout says --wait gave up; the error carries the last progress.
var errTimeout = errors.New("timed out")

// poll calls step every interval until it returns done or an error, or
// timeout passes; each new progress line step returns is printed once.
// On timeout the error carries the last line.
func poll(ctx context.Context, out io.Writer, interval, timeout time.Duration, step func(context.Context) (done bool, line string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := ""
	for {
		done, line, err := step(ctx)
		// A request cut short by the deadline (client-go's rate limiter
		// refuses one that would end after it) is the timeout, reported
		// with the last status, not an error of its own.
		if dl, _ := ctx.Deadline(); err != nil && ctx.Err() == nil && time.Until(dl) > interval {
			return err
		}
		if line != "" && line != last {
			_, _ = fmt.Fprintln(out, line)
			last = line
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s; last status: %s", errTimeout, timeout, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// WaitRunning follows a tenant until it runs, printing each change of its
// phase or reason; it fails when the tenant fails, disappears, or timeout
// passes (with the last reason, e.g. that its node group is at maxSize).
func WaitRunning(ctx context.Context, c client.Reader, name string, out io.Writer, interval, timeout time.Duration) error {
	err := poll(ctx, out, interval, timeout, func(ctx context.Context) (bool, string, error) {
		t := &v1alpha1.Tenant{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, t); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "", fmt.Errorf("tenant %s was deleted while waiting for it", name)
			}
			return false, "", fmt.Errorf("reading tenant %s: %w", name, err)
		}
		switch t.Status.Phase {
		case v1alpha1.TenantRunning:
			return true, fmt.Sprintf("tenant %s runs on node %s (node group %s)", name, t.Status.NodeName, t.Status.NodeGroup), nil
		case v1alpha1.TenantFailed:
			return false, "", fmt.Errorf("tenant %s failed: %s", name, Progress(t))
		}
		return false, Progress(t), nil
	})
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("tenant %s is not running: %w", name, err)
	}
	return err
}

// WaitGone follows a deleted tenant until it, its pods and, when node is
// set (the node it had to itself), that node are gone: berth removes an
// empty node after its group's consolidateAfter.
func WaitGone(ctx context.Context, c client.Reader, name, node string, out io.Writer, interval, timeout time.Duration) error {
	err := poll(ctx, out, interval, timeout, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(v1alpha1.TenantNamespacePrefix+name), client.MatchingLabels{v1alpha1.LabelTenant: name}); err != nil {
			return false, "", fmt.Errorf("listing pods of tenant %s: %w", name, err)
		}
		t := &v1alpha1.Tenant{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, t)
		switch {
		case err == nil:
			return false, fmt.Sprintf("%s, %d pod(s) left", Progress(t), len(pods.Items)), nil
		case !apierrors.IsNotFound(err):
			return false, "", fmt.Errorf("reading tenant %s: %w", name, err)
		case len(pods.Items) > 0:
			return false, fmt.Sprintf("%s: deleted, %d pod(s) terminating", name, len(pods.Items)), nil
		case node == "":
			return true, fmt.Sprintf("tenant %s is gone", name), nil
		}
		n := &corev1.Node{}
		switch err := c.Get(ctx, client.ObjectKey{Name: node}, n); {
		case apierrors.IsNotFound(err):
			return true, fmt.Sprintf("tenant %s and its node %s are gone", name, node), nil
		case err != nil:
			return false, "", fmt.Errorf("reading node %s: %w", node, err)
		}
		return false, fmt.Sprintf("%s: deleted; node %s still there (berth removes it once it is empty, after its group's consolidateAfter)", name, node), nil
	})
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("tenant %s is not gone: %w", name, err)
	}
	return err
}
