// Package bench measures berth's planner and Karpenter's scheduler on the
// same seeded workload (internal/testing/workload) in one run:
//
//	cd bench && GOTOOLCHAIN=auto go test -run '^$' -bench . -benchtime 3x -count 6 | tee out.txt
//	go tool -modfile=../hack/tools/go.mod benchstat out.txt
//
// Both sides plan the same pods from zero nodes against 400 instance types
// with the same shapes, offerings and prices (Karpenter's fake cloud
// provider on its side, the equivalent NodeGroup on ours). Karpenter is set
// up as in its own scheduling benchmark: the scheduler and topology are
// built outside the timed loop, only Solve is timed. berth's timed loop is
// the whole scaleup.Run (snapshot, templates, packing, plan) of a round
// after the first (the node group's options kept, as Karpenter keeps its
// instance types).
package bench

import (
	"context"
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/testing/workload"
)

const (
	instanceTypes = 400
	seed          = 42
)

var sizes = []int{100, 1000, 5000, 20000}

func BenchmarkBerth(b *testing.B) {
	ng := workload.NodeGroup(instanceTypes)
	// As read from the API server: berth's provisioner keeps the node
	// group's options from round to round (scaleup.Options), as
	// Karpenter's keeps its provider's instance types; the first round,
	// outside the timed loop, builds them.
	ng.UID, ng.Generation = "uid-bench", 1
	for _, n := range sizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := workload.Pods(n, seed)
			in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods, Limits: scaleup.Limits{Resources: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}},
				Options: scaleup.NewOptions()}
			if _, err := scaleup.Run(in); err != nil {
				b.Fatal(err)
			}
			var plan *scaleup.Plan
			for b.Loop() {
				var err error
				if plan, err = scaleup.Run(in); err != nil {
					b.Fatal(err)
				}
			}
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable: %s", len(plan.Unschedulable), plan.Unschedulable[0].Message)
			}
			report(b, n, len(plan.NewNodes), plan.PricePerHour, ng, pods)
		})
	}
}

func BenchmarkKarpenter(b *testing.B) {
	log.SetLogger(logging.NopLogger)
	ng := workload.NodeGroup(instanceTypes)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := workload.Pods(n, seed)
			ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
			k := newKarpenterEnv()
			s := k.scheduler(ctx, b, pods)
			var results scheduling.Results
			for b.Loop() {
				var err error
				if results, err = s.Solve(ctx, pods); err != nil {
					b.Fatal(err)
				}
			}
			if len(results.PodErrors) > 0 {
				b.Fatalf("%d pods did not schedule", len(results.PodErrors))
			}
			report(b, n, len(results.NewNodeClaims), karpenterPrice(results, k.its), ng, pods)
		})
	}
}

// BenchmarkKarpenterRound times what a Karpenter provisioning round does
// for the same pods: its provisioner builds the topology and a new
// scheduler (whose node claim templates hold the instance types) every
// round, then solves. berth's scaleup.Run builds its templates (from the
// options it keeps, as Karpenter keeps the instance types) inside its
// timed loop too, so this is the round-for-round comparison;
// BenchmarkKarpenter, as Karpenter's own benchmark, times Solve alone.
// At 100 and 1,000 pods (the setup's share shrinks with the pods).
func BenchmarkKarpenterRound(b *testing.B) {
	log.SetLogger(logging.NopLogger)
	ng := workload.NodeGroup(instanceTypes)
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := workload.Pods(n, seed)
			ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
			k := newKarpenterEnv()
			var results scheduling.Results
			for b.Loop() {
				var err error
				if results, err = k.scheduler(ctx, b, pods).Solve(ctx, pods); err != nil {
					b.Fatal(err)
				}
			}
			if len(results.PodErrors) > 0 {
				b.Fatalf("%d pods did not schedule", len(results.PodErrors))
			}
			report(b, n, len(results.NewNodeClaims), karpenterPrice(results, k.its), ng, pods)
		})
	}
}

// report adds the figures the comparison reads: price/lb is the price
// over workload.LowerBound, price/lb-req over the bound of requests
// alone (the one runs before 2026-11-28 reported).
func report(b *testing.B, n, nodes int, price float64, ng *v1alpha1.NodeGroup, pods []*corev1.Pod) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/sec")
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(price/workload.LowerBound(ng, pods), "price/lb")
	b.ReportMetric(price/workload.RequestsLowerBound(ng, pods), "price/lb-req")
	b.ReportMetric(price, "price/h")
}

// karpenterEnv is what a Karpenter controller keeps between rounds: the
// node pool, its fake cloud provider's 400 instance types (Karpenter
// caches the provider's catalogue) and the cluster state.
type karpenterEnv struct {
	nodePool *karpv1.NodePool
	its      []*cloudprovider.InstanceType
	kube     client.Client
	cluster  *state.Cluster
	clk      clock.Clock
}

// newKarpenterEnv builds the environment as Karpenter's scheduling
// benchmark does.
func newKarpenterEnv() *karpenterEnv {
	nodePool := test.NodePool(karpv1.NodePool{Spec: karpv1.NodePoolSpec{Limits: karpv1.Limits{
		corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi"),
	}}})
	cp := fake.NewCloudProvider()
	its := fake.InstanceTypes(instanceTypes)
	cp.InstanceTypes = its
	kube := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	return &karpenterEnv{nodePool: nodePool, its: its, kube: kube, cluster: state.NewCluster(clk, kube, cp), clk: clk}
}

// scheduler builds the topology and the scheduler for pods, as
// Karpenter's provisioner does every round.
func (k *karpenterEnv) scheduler(ctx context.Context, b *testing.B, pods []*corev1.Pod) *scheduling.Scheduler {
	byPool := map[string][]*cloudprovider.InstanceType{k.nodePool.Name: k.its}
	topology, err := scheduling.NewTopology(ctx, k.kube, k.cluster, nil, []*karpv1.NodePool{k.nodePool}, byPool, pods)
	if err != nil {
		b.Fatal(err)
	}
	return scheduling.NewScheduler(ctx, k.kube, []*karpv1.NodePool{k.nodePool}, k.cluster, nil, topology, byPool, nil,
		events.NewRecorder(&record.FakeRecorder{}), k.clk, nil, nil, scheduling.NumConcurrentReconciles(5))
}

// karpenterPrice is the price of Karpenter's plan: each new node claim
// launches the cheapest offering compatible with its requirements among its
// remaining instance types.
func karpenterPrice(r scheduling.Results, _ []*cloudprovider.InstanceType) float64 {
	total := 0.0
	for _, nc := range r.NewNodeClaims {
		best := math.Inf(1)
		for _, it := range nc.InstanceTypeOptions {
			if o := it.Offerings.Available().Compatible(nc.Requirements).Cheapest(); o != nil {
				best = min(best, o.Price)
			}
		}
		total += best
	}
	return total
}

// TestCataloguesAgree checks that berth's NodeGroup mirrors Karpenter's fake
// instance types: same capacity minus overhead and same price for every
// type, so the two sides plan against the same catalogue.
func TestCataloguesAgree(t *testing.T) {
	ng := workload.NodeGroup(instanceTypes)
	its := fake.InstanceTypes(instanceTypes)
	for i, it := range its {
		ours := ng.Spec.InstanceTypes[i]
		alloc := it.Allocatable()
		if ours.Name != it.Name || !ours.Capacity.Cpu().Equal(*alloc.Cpu()) || !ours.Capacity.Memory().Equal(*alloc.Memory()) {
			t.Fatalf("type %d: berth %s cpu %s mem %s, karpenter %s cpu %s mem %s", i, ours.Name, ours.Capacity.Cpu(), ours.Capacity.Memory(),
				it.Name, alloc.Cpu(), alloc.Memory())
		}
		want := it.Offerings.Cheapest().Price
		var got float64
		_, _ = fmt.Sscanf(ours.Offerings[0].PricePerHour, "%g", &got)
		if math.Abs(got-want) > 1e-6 {
			t.Fatalf("type %s: berth price %v, karpenter %v", it.Name, got, want)
		}
		if len(ours.Offerings) != len(it.Offerings) {
			t.Fatalf("type %s: %d offerings, karpenter %d", it.Name, len(ours.Offerings), len(it.Offerings))
		}
	}
}
