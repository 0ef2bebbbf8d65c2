package disruption_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/disruption"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// stopsAfterLaunch is a slowBoot cloud (the Node of a launch does not
// register for minutes) that records when it launched, after which the
// controller's node writes fail: the controller stopped between a
// replacement's launch and its marks.
type stopsAfterLaunch struct {
	*slowBoot
	stopped *atomic.Bool
}

func (c stopsAfterLaunch) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	inst, err := c.slowBoot.Create(ctx, req)
	if err == nil {
		c.stopped.Store(true)
	}
	return inst, err
}

// TestARestartBetweenAReplacementsLaunchAndItsMarksLaunchesItOnce: the
// controller launches a replacement (a cheaper node for three, or one for
// a drifted node) whose Node takes minutes to register, and stops before
// it marks the nodes replaced. The controller started next does not
// launch a second replacement: the node carries the record of the launch
// written before it.
func TestARestartBetweenAReplacementsLaunchAndItsMarksLaunchesItOnce(t *testing.T) {
	for _, tc := range []struct {
		name, group string
		nodes       int
		prepare     func(f *fixture)
	}{
		{name: "a cheaper node", group: "intent-cheaper", nodes: 3, prepare: func(f *fixture) {
			f.deploymentOf(3, "1200m")
			f.updateGroup(func(g *v1alpha1.NodeGroup) { b.InstanceType("l-8", "8", "32Gi", b.OnDemand("zone-a", "0.20"))(g) })
		}},
		{name: "a drifted node", group: "intent-drift", nodes: 1, prepare: func(f *fixture) {
			f.deployment(1)
			f.updateGroup(func(g *v1alpha1.NodeGroup) { g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"} })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, tc.group, tc.nodes)
			boot := &slowBoot{CloudProvider: kwok.New(env.Client, clock.RealClock{})}
			var stopped atomic.Bool
			f.ctrl.Cloud = stopsAfterLaunch{slowBoot: boot, stopped: &stopped}
			f.ctrl.Client = interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, node := obj.(*corev1.Node); node && stopped.Load() {
						return errors.New("the controller stopped")
					}
					return c.Patch(ctx, obj, patch, opts...)
				}})
			tc.prepare(f)
			expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
				_, _ = f.ctrl.RunOnce(context.Background())
				return stopped.Load(), "no replacement launched", nil
			})

			f.ctrl = disruption.New(disruption.Deps{Client: env.Client, Cloud: boot, Recorder: f.events, Clock: f.clk}, disruption.Options{Interval: time.Second})
			for range 3 {
				f.clk.Step(30 * time.Second)
				_, _ = f.ctrl.RunOnce(context.Background())
			}
			boot.mu.Lock()
			launched := len(boot.launched)
			boot.mu.Unlock()
			if launched != 1 {
				t.Errorf("%d replacements launched across the restart, want 1", launched)
			}
		})
	}
}

// failsSecondLaunch is a cloud whose second launch fails (out of
// capacity), as a replacement of two nodes can half-fail.
type failsSecondLaunch struct {
	cloudprovider.CloudProvider
	launches int
}

func (c *failsSecondLaunch) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	c.launches++
	if c.launches == 2 {
		return nil, &cloudprovider.InsufficientCapacityError{Offering: req.Offering, Message: "no capacity"}
	}
	return c.CloudProvider.Create(ctx, req)
}

// TestADriftReplacementThatLaunchesHalfIsMarkedWithWhatLaunched: a
// drifted node's two pods need two new nodes (its group now offers only
// 1-cpu nodes); the second launch fails. The node is marked replaced by
// the one that launched (not left with only the record of the launch,
// which would hold every replacement for the max provision time and leave
// the launched node unnamed).
func TestADriftReplacementThatLaunchesHalfIsMarkedWithWhatLaunched(t *testing.T) {
	f := setup(t, "intent-half", 1)
	f.ctrl.Cloud = &failsSecondLaunch{CloudProvider: f.ctrl.Cloud}
	f.deploymentOf(2, "900m")
	f.updateGroup(func(g *v1alpha1.NodeGroup) {
		g.Spec.Template.Labels = map[string]v1alpha1.LabelValue{"tier": "gold"}
		g.Spec.InstanceTypes = nil
		b.InstanceType("s-1", "1", "4Gi", b.OnDemand("zone-a", "0.05"))(g)
	})
	var launched []string
	for range 3 {
		res, _ := f.ctrl.RunOnce(context.Background())
		if res != nil {
			launched = append(launched, res.Replacements...)
		}
		if len(launched) > 0 {
			break
		}
	}
	if len(launched) != 1 {
		t.Fatalf("replacements launched %v, want the first of two (the second fails)", launched)
	}
	n := f.node(f.nodes[0])
	if n.Annotations[v1alpha1.AnnotationReplacedBy] != launched[0] || n.Annotations[v1alpha1.AnnotationReplacementLaunching] != "" {
		t.Errorf("the drifted node's annotations %v: want it marked replaced by %s and no record of a launch left", n.Annotations, launched[0])
	}
}
